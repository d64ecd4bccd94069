#pragma once
// Runs a ring schedule over same-host slot rings (transport/shm/slot_ring.hpp)
// instead of the transport: the chunk from the left neighbour is read where
// it lies in shared memory, reduced with this rank's values straight into
// the slot for the right neighbour, and only the final result is written to
// the output. Per rank and tensor byte that is one read of the input and
// one write of the output; the slots stay in the caches. No system call, no
// page pinning, no staging copy per chunk.
//
// Every rank walks the same columns and steps in the same order, so each
// ring carries its chunks in one order and a rank never waits for a chunk
// the left neighbour has not yet been able to send. With at least two
// slots per ring that cannot deadlock: all ranks blocked on full rings
// would need more chunks in flight than the ring ever holds (each rank is
// at most one chunk ahead of what it took in).
//
// A run is an algorithm (exec/algorithm.hpp) that exec::drive runs, as the
// transport executors are: each round moves the ring as far as the slots
// allow (a chunk to take from the left, a slot to fill on the right) and
// never waits; drive watches liveness, the deadline and the interrupt, and
// sleeps on the awaited ring's futex. The transport is still progressed,
// once a column and every 16th still round, for the control channel's
// notices and queued posts.

#include <cstdint>

#include "algo/ring.hpp"
#include "exec/algorithm.hpp"
#include "common/status.hpp"
#include "exec/ring_executor.hpp"
#include "exec/primitives.hpp"
#include "exec/wait_policy.hpp"
#include "transport/shm/slot_ring.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class ShmRingExecutor final {
 public:
  // `from_left`: the ring this rank receives on (it made it); `to_right`:
  // the right neighbour's, which this rank attached to.
  ShmRingExecutor(transport::Transport* transport, transport::shm::SlotRing* from_left,
                  transport::shm::SlotRing* to_right);

  // The most bytes one chunk may have: the schedule's chunk_elems times the
  // element size must not exceed it.
  size_t chunk_bytes() const { return to_right_->slot_bytes(); }

  // Out of place, a ring over at least `bytes` (0: never) writes its output
  // with non-temporal stores (RR_SHM_STREAM_BYTES).
  void set_stream_bytes(size_t bytes) { stream_bytes_ = bytes; }

  // Runs `schedule` (any phases) on `call`, whose reductions happen on the
  // host (call.reducer is null). A failure leaves the rings out of step:
  // the communicator must not run on them again.
  Status run(const algo::RingSchedule& schedule, Call& call);

  // Bytes pushed to the right neighbour and taken from the left, ever.
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  // What the primitives moved, ever (algo/memory_traffic.hpp is its model).
  const Traffic& traffic() const { return traffic_; }

 private:
  class Steps;  // one run as an Algorithm (and its sleeper): shm_ring_executor.cpp

  transport::Transport* transport_;
  transport::shm::SlotRing* from_left_;
  transport::shm::SlotRing* to_right_;
  size_t stream_bytes_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  Traffic traffic_;

};

}  // namespace rr::exec
