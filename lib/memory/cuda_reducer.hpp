#pragma once
// The ring's reducer on a GPU (exec/reducer.hpp; CUDA build only): each
// received chunk is reduced by a kernel (kernels/device_reduce.hpp) that
// reads this rank's values from device memory and the chunk from its pinned
// staging slot, and writes the result into pinned host memory the ring sends
// from next, in one pass: no copy of the chunk to the device, no host
// arithmetic. The kernel runs on a stream of the reducer's own, and reduce()
// returns once it finished (the ring sends the result next).
//
// Every host pointer it is given must be pinned and mapped (cudaHostRegister
// with cudaHostRegisterMapped): the staging slots and the communicator's ring
// staging (comm/stream_order.cpp registers both).

#include "exec/reducer.hpp"
#include "memory/cuda_handles.hpp"

namespace rr::memory {

class CudaReducer : public exec::Reducer {
 public:
  // Makes the stream on the current device.
  Status init() { return stream_.create("ring reductions"); }

  Status reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype, rrRedOp_t op,
                bool last, int nranks) override;

 private:
  CudaStream stream_;
};

}  // namespace rr::memory
