#include "memory/cuda_reducer.hpp"

#include <string>

#include "kernels/device_reduce.hpp"

namespace rr::memory {

Status CudaReducer::reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype,
                           rrRedOp_t op, bool last, int nranks) {
  // Operands in the host path's order (reduce::reduce(dst, mine, arrived)).
  RR_RETURN_IF_ERROR(last ? kernels::device_reduce_last(dst, mine, arrived, count, dtype, op, nranks, stream_.get())
                          : kernels::device_reduce(dst, mine, arrived, count, dtype, op, stream_.get()));
  return cuda_status(cudaStreamSynchronize(stream_.get()),
                     "the reduction kernel of " + std::to_string(count) + " elements (cudaStreamSynchronize)");
}

}  // namespace rr::memory
