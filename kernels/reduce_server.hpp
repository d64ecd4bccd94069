#pragma once
// Reduction servers (RR_GPU_REDUCE=device; memory/cuda_copy_engine.hpp).
// A staged allreduce's ring receives chunks on the host and must reduce each
// with this rank's values, which live on the device. A kernel launched from
// the host at that moment would be GPU work issued after the call's waits,
// which a shared hardware queue could hold behind them. Instead, a server
// kernel per segment is enqueued with the call's other GPU work, in order
// (memory/copy_engine.hpp); it runs the reductions the host posts in a
// mailbox, one at a time, until the host ends its segment or posts one of a
// later segment.
//
// The mailbox is pinned host memory mapped into the device. The host writes
// a job's fields, then `posted` (a release store); the server's blocks each
// reduce their share, the last to finish writes `done`. `ended` lets every
// server of a segment up to it exit once idle. Counts only grow.
//
// Plain C++ like device_reduce.hpp: `stream` is a cudaStream_t as void*.

#include <cstddef>
#include <cstdint>

#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::kernels {

struct ReduceMailbox {
  alignas(64) uint64_t posted;  // host: the last job posted (0: none yet)
  uint64_t ended;               // host: servers of segments <= ended exit when idle
  alignas(64) uint64_t done;    // device: the last job finished
  // The job posted last: dst = mine op arrived (with `last`, rrAvg divides by `divisor`).
  alignas(64) uint64_t segment;
  uint64_t count;
  void* dst;
  const void* mine;
  const void* arrived;
  int32_t last;
  int32_t divisor;
};

// The servers' own state, in device memory (zeroed before the first server
// runs): the blocks done with the current job, and block 0's copy of the
// mailbox, which the other blocks poll instead of the host's memory.
struct ReduceServerState {
  unsigned acks;
  ReduceMailbox mirror;
};

// Blocks of a server: enough to keep PCIe reads in flight, few enough to
// leave the GPU to the user's kernels. Every block takes part in every job.
constexpr int kServerBlocks = 16;

// Enqueues on `stream` the server of segment `segment` for `dtype` and `op`.
// `box` is the mailbox's device pointer; `state` the servers' (one engine's).
// A failed launch is CudaError naming it.
Status enqueue_reduce_server(ReduceMailbox* box, ReduceServerState* state, uint64_t segment, rrDataType_t dtype,
                             rrRedOp_t op, void* stream);

// Loads every server's code now, so that lazy module loading never has to
// load one while a call's servers run.
Status preload_reduce_servers();

}  // namespace rr::kernels
