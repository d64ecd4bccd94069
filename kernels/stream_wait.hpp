#pragma once
// The device side of the staging pipeline's counters (memory/copy_engine.hpp,
// memory/cuda_copy_engine.hpp): one-thread kernels that
//   - hold their stream until the host wrote at least `value` into `flag`
//     (wait_release), and
//   - write `value` into `flag` once the work before them on their stream
//     is done (signal: a copy's data is in place when the host sees it).
//
// `flag` is pinned host memory mapped into the device (cudaHostAllocMapped),
// passed as the device's pointer to it; the host writes and reads it with
// atomic release/acquire operations. The waiting thread sleeps (__nanosleep,
// about 1 us) between reads, so it costs one warp slot and a PCIe read per
// microsecond, not a multiprocessor.
//
// Plain C++ like device_reduce.hpp: `stream` is a cudaStream_t as void*.

#include <cstdint>

#include "common/status.hpp"

namespace rr::kernels {

// Enqueue on `stream`; a failed launch is CudaError naming it.
Status enqueue_flag_wait(const volatile uint64_t* flag, uint64_t value, void* stream);
Status enqueue_flag_set(volatile uint64_t* flag, uint64_t value, void* stream);
// Loads both kernels now (cudaFuncGetAttributes). Under lazy loading (CUDA's
// default) the first launch would load them, which may wait for the whole
// context: in the middle of issuing a call, that wait could be on work that
// only the rest of the call releases.
Status preload_flag_kernels();

}  // namespace rr::kernels
