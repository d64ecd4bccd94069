#include "memory/cuda_reducer.hpp"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kernels/device_reduce.hpp"

namespace rr::memory {

Status CudaReducer::init(int timeout_ms) {
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (connections != nullptr && std::strcmp(connections, "1") == 0) {
    return InvalidArgument(
        "RR_GPU_REDUCE=device with CUDA_DEVICE_MAX_CONNECTIONS=1: the reduction kernels would queue behind the "
        "staging streams' waits for them; use RR_GPU_REDUCE=host (or more connections)");
  }
  int device = 0;
  int host_pointers = 0;
  RR_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  RR_RETURN_IF_ERROR(
      cuda_status(cudaDeviceGetAttribute(&host_pointers, cudaDevAttrCanUseHostPointerForRegisteredMem, device),
                  "cudaDeviceGetAttribute(cudaDevAttrCanUseHostPointerForRegisteredMem)"));
  if (host_pointers == 0) {
    return InvalidArgument("RR_GPU_REDUCE=device: GPU " + std::to_string(device) +
                           " cannot use host pointers to registered memory in kernels; use RR_GPU_REDUCE=host");
  }
  timeout_ms_ = timeout_ms;
  return stream_.create("ring reductions");
}

Status CudaReducer::reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype,
                           rrRedOp_t op, bool last, int nranks) {
  // Operands in the host path's order (reduce::reduce(dst, mine, arrived)).
  RR_RETURN_IF_ERROR(last ? kernels::device_reduce_last(dst, mine, arrived, count, dtype, op, nranks, stream_.get())
                          : kernels::device_reduce(dst, mine, arrived, count, dtype, op, stream_.get()));
  // Usually done in microseconds: spin briefly, then nap; never forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  for (int round = 0;; ++round) {
    const cudaError_t state = cudaStreamQuery(stream_.get());
    if (state == cudaSuccess) return Status::Ok();
    if (state != cudaErrorNotReady) {
      return cuda_status(state, "the reduction kernel of " + std::to_string(count) + " elements");
    }
    (void)cudaGetLastError();
    if (std::chrono::steady_clock::now() > deadline) {
      return Timeout("the reduction kernel of " + std::to_string(count) + " elements did not finish within " +
                     std::to_string(timeout_ms_) + " ms; its stream may share a hardware queue with a stream that "
                     "waits for this call (CUDA_DEVICE_MAX_CONNECTIONS): use RR_GPU_REDUCE=host");
    }
    if (round < 1000) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace rr::memory
