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
#include "exec/call.hpp"
#include "exec/column_loop.hpp"
#include "exec/primitives.hpp"
#include "exec/reducer.hpp"
#include "exec/wait_policy.hpp"

namespace rr::exec {

// The error for a chunk of the wrong length: the left neighbour of
// `schedule`'s rank sent `got` bytes for `column` of `step` where this
// rank expected `expected` (ranks that passed different counts or types).
Status wrong_chunk_length(const algo::RingSchedule& schedule, const Call& call, int step, size_t column,
                          size_t got, size_t expected);

class RingExecutor final : private ColumnLoop {
 public:
  // `pool` must hold at least 2 x depth slots; the executor keeps per-column
  // state for `depth` columns and `max_steps` steps, made here, once.
  RingExecutor(transport::Transport* transport, memory::StagingPool* pool, int depth, int nranks);

  // Runs `schedule` (any phases) on `call`: its buffers as call.hpp lays
  // them out by phase, reduced as call.reducer says.
  // On failure, every receive it posted is canceled before it returns;
  // `stranded()` says whether a send could not be retired.
  Status run(const algo::RingSchedule& schedule, Call& call);

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

  // ColumnLoop.
  Status start(size_t slot, size_t index) override;
  bool active(size_t slot) const override { return columns_[slot].active; }
  Status advance(size_t slot, bool* moved, bool* finished) override;
  void needs(bool more_columns, bool* left, bool* right) const override;
  // The error for a stalled ring: the oldest chunk in flight, its step and the
  // peer it waits on (`failed_peer`, when one is known to have failed).
  Status describe_stall(Code code, int failed_peer, const std::string& cause) const override;
  void drain() override;

  Status post_recv(Column& column, size_t slot, int step);
  Status post_recvs(Column& column, size_t slot);
  Status post_send(Column& column, size_t slot, int step);
  // Where `step`'s chunk arrives: a staging slot when the step reduces it,
  // else its place in the output. And what the next step sends it from: the
  // output, except a reduce-scatter's partial result, which stays in the
  // staging slot it was reduced in (recv holds only the owned segment).
  void* landing(size_t slot, int step, const algo::Range& chunk) const;
  void* forwarded_from(size_t slot, int step, const algo::Range& chunk) const;
  void* staging(size_t slot, int step) const;
  bool sends_done(const Column& column) const;
  // A post the transport refused, said as this call's error.
  Status refused(const Status& posted) const;

  transport::Transport* transport_;
  memory::StagingPool* pool_;
  std::vector<Column> columns_;                 // [slot]
  std::vector<transport::Completion> sends_;    // [slot][step]
  bool stranded_ = false;

  // The call being run.
  const algo::RingSchedule* schedule_ = nullptr;
  Call* call_ = nullptr;
  const RingBuffers* buffers_ = nullptr;
};

}  // namespace rr::exec
