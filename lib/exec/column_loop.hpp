#pragma once
// The pipelined executors on the transport (the ring and the chain) as one
// algorithm (exec/algorithm.hpp) that exec::drive runs: `depth` columns of
// chunks in flight, each advanced as its chunks arrive and replaced by the
// next one once done; after a round in which nothing moved, drive's wait
// policy decides whether to go on, naming the stall when a neighbour failed,
// the deadline passed or the call was interrupted. An executor says how a
// column starts and advances, which neighbours it still needs, what the
// stall is, and how to drain.

#include <cstddef>
#include <string>

#include "common/status.hpp"
#include "exec/call.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class ColumnLoop {
 public:
  virtual ~ColumnLoop() = default;

 protected:
  // Runs `total` columns in `depth` slots for `call`, whose ring neighbours
  // are `left` and `right`, to their end (exec::drive). Not ok: drain() ran.
  Status run_columns(transport::Transport* transport, Call& call, size_t depth, size_t total, int left,
                     int right);
  // Columns finished so far in this run (for stall messages).
  size_t columns_done() const { return done_; }

  // Starts column `index` in `slot` (which is then active).
  virtual Status start(size_t slot, size_t index) = 0;
  virtual bool active(size_t slot) const = 0;
  // Moves `slot`'s column as far as what arrived allows; *moved: a chunk
  // moved; *finished: the column is done (and no longer active).
  virtual Status advance(size_t slot, bool* moved, bool* finished) = 0;
  // Which neighbours the active columns still wait on: the left only while
  // a posted receive is pending, the right while a send to it is in flight
  // or still to come (`more_columns`: columns not yet started). A neighbour
  // that finished and left legitimately must not fail the call.
  virtual void needs(bool more_columns, bool* left, bool* right) const = 0;
  // The stalled call's error (kOk: a dump's text), `failed_peer` the
  // neighbour known to have failed (-1: none).
  virtual Status describe_stall(Code code, int failed_peer, const std::string& cause) const = 0;
  // After a failure: cancels what is posted, gives sends a bounded time.
  virtual void drain() = 0;

 private:
  class Columns;  // the Algorithm that drive() runs: column_loop.cpp
  size_t done_ = 0;
};

}  // namespace rr::exec
