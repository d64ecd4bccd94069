#pragma once
// The device side of a stream-ordered call (lib/comm/stream_order.hpp): one
// GPU thread, enqueued on the caller's stream, that holds the stream until
// the host writes a sequence number at least `value` into `flag`, so work
// enqueued after the call runs after the call's result is in place.
//
// `flag` is pinned host memory mapped into the device (cudaHostAllocMapped),
// passed as the device's pointer to it; the host writes it with a release
// store. The thread sleeps (__nanosleep, about 1 us) between reads, so it
// costs one warp slot and a PCIe read per microsecond, not a multiprocessor.
//
// Plain C++ like device_reduce.hpp: `stream` is a cudaStream_t as void*.

#include <cstdint>

#include "common/status.hpp"

namespace rr::kernels {

// Enqueues the wait on `stream`; a failed launch is CudaError naming it.
Status enqueue_flag_wait(const volatile uint64_t* flag, uint64_t value, void* stream);

}  // namespace rr::kernels
