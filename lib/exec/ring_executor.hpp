#pragma once
// Runs a ring schedule over a transport: several chunk columns in flight,
// each moving through its steps as its chunks arrive, reductions done as soon
// as a chunk lands, a deadline on the whole operation, and peer failures
// reported by name. It does not know which transport is under it.

#include <chrono>
#include <cstdint>
#include <vector>

#include "algo/ring.hpp"
#include "common/status.hpp"
#include "memory/staging_pool.hpp"
#include "ringreduce/ringreduce.h"
#include "transport/transport.hpp"
#include "exec/reducer.hpp"
#include "exec/wait_policy.hpp"

namespace rr::exec {

using Clock = std::chrono::steady_clock;

// Buffers, by the schedule's phases:
//   both (allreduce):   send and recv hold all `count` elements;
//   reduce-scatter:     send holds all, recv only this rank's segment; the
//                       partial sums travel through staging slots;
//   all-gather:         send holds only this rank's segment, recv all.
struct RingCall {
  const char* name = "allreduce";  // for error messages
  uint64_t sequence = 0;           // the communicator's operation number
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;                // elements of the whole ring buffer
  rrDataType_t dtype = rrFloat32;
  rrRedOp_t op = rrSum;
  Clock::time_point deadline;
  Interrupt* interrupt = nullptr;  // checked whenever the ring stalls
  // Reductions (exec/reducer.hpp): null, on the host with this rank's values
  // read from send; else by `reducer`, with them read from reduce_source
  // (laid out as send).
  Reducer* reducer = nullptr;
  const void* reduce_source = nullptr;
};

// The error for a chunk of the wrong length: the left neighbour of
// `schedule`'s rank sent `got` bytes for `column` of `step` where this
// rank expected `expected` (ranks that passed different counts or types).
Status wrong_chunk_length(const algo::RingSchedule& schedule, const RingCall& call, int step, size_t column,
                          size_t got, size_t expected);

class RingExecutor {
 public:
  // `pool` must hold at least 2 x depth slots; the executor keeps per-column
  // state for `depth` columns and `max_steps` steps, made here, once.
  RingExecutor(transport::Transport* transport, memory::StagingPool* pool, int depth, int nranks);

  // Runs the fused reduce-scatter + all-gather of `schedule` on `call`.
  // On failure, every receive it posted is canceled before it returns;
  // `stranded()` says whether a send could not be retired.
  Status run(const algo::RingSchedule& schedule, const RingCall& call);

  bool stranded() const { return stranded_; }

 private:
  struct Column {
    size_t index = 0;
    int step = 0;       // the step whose receive is awaited next
    int next_recv = 0;  // the first step whose receive is not posted yet
    bool active = false;
    transport::Completion recv[2];        // step s receives into recv[s % 2]
    transport::Completion* sends = nullptr;  // [step]
  };

  Status start_column(Column& column, size_t slot, size_t index);
  Status post_recv(Column& column, size_t slot, int step);
  Status post_recvs(Column& column, size_t slot);
  Status post_send(Column& column, size_t slot, int step);
  void* staging(size_t slot, int step) const;
  Status advance(Column& column, size_t slot, bool* finished);
  bool sends_done(const Column& column) const;
  // The error for a stalled ring: the oldest chunk in flight, its step and the
  // peer it waits on (`failed_peer`, when one is known to have failed).
  Status describe_stall(Code code, int failed_peer) const;
  void drain();

  transport::Transport* transport_;
  memory::StagingPool* pool_;
  std::vector<Column> columns_;                 // [slot]
  std::vector<transport::Completion> sends_;    // [slot][step]
  bool stranded_ = false;

  // The call being run.
  const algo::RingSchedule* schedule_ = nullptr;
  const RingCall* call_ = nullptr;
  size_t elem_bytes_ = 0;
  size_t columns_done_ = 0;
};

}  // namespace rr::exec
