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
//
// Its kernels are enqueued by the host half of a staged call, after the
// call's device half: if the GPU puts the reducer's stream in the hardware
// queue of a stream that waits for this call (CUDA_DEVICE_MAX_CONNECTIONS),
// the kernel waits behind it. CUDA_DEVICE_MAX_CONNECTIONS=1 is refused for
// that reason; otherwise a kernel that has not finished within `timeout_ms`
// fails the call (naming this cause) instead of hanging it.

#include "exec/reducer.hpp"
#include "memory/cuda_handles.hpp"

namespace rr::memory {

class CudaReducer : public exec::Reducer {
 public:
  // Makes the stream on the current device.
  Status init(int timeout_ms);

  Status reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype, rrRedOp_t op,
                bool last, int nranks) override;

 private:
  CudaStream stream_;
  int timeout_ms_ = 0;
};

}  // namespace rr::memory
