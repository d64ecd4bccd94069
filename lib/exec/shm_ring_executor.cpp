#include "exec/shm_ring_executor.hpp"

#include <cstring>
#include <string>

#include "exec/stall.hpp"
#include "reduce/reduce.hpp"

namespace rr::exec {

ShmRingExecutor::ShmRingExecutor(transport::Transport* transport, transport::shm::SlotRing* from_left,
                                 transport::shm::SlotRing* to_right)
    : transport_(transport), from_left_(from_left), to_right_(to_right) {}

void ShmRingExecutor::sleep(int timeout_ms) {
  if (sleeping_on_left_) {
    from_left_->wait_readable(timeout_ms);
  } else {
    to_right_->wait_writable(timeout_ms);
  }
}

Status ShmRingExecutor::still(WaitPolicy& wait, int peer, bool receiving, int step, size_t column) {
  const algo::RingSchedule& s = *schedule_;
  // Notices from peers and posts handed over by other threads travel on the transport.
  const bool moved = wait.checks_due() && transport_->progress();
  sleeping_on_left_ = receiving;
  int failed_peer = -1;
  Status cause = wait.after_still_round(receiving ? peer : -1, receiving ? -1 : peer, moved, &failed_peer);
  if (cause.ok()) return cause;
  Stall stall;
  stall.rank = s.rank();
  stall.wait = receiving ? Stall::Wait::kChunk : Stall::Wait::kRoom;
  stall.peer = peer;
  stall.chunk = column;
  stall.phase = s.phase_name(step);
  stall.phase_step = s.phase_step(step);
  stall.path = "same-host shared memory";
  return stalled(*call_, cause.code(), stall, cause.code() == Code::kTimeout ? std::string() : cause.message());
}

// In both waits, what ended the wait (a failure notice, the deadline) may
// have come after the ring was last read: most often a notice about a later
// call from a peer that finished this one, its last chunks left in the ring
// or its last slot freed. What is there is taken: the call goes on, and the
// notice, kept, fails the next step that has to wait.
Status ShmRingExecutor::take(WaitPolicy& wait, int step, size_t column, const void** data, size_t* bytes) {
  while ((*data = from_left_->front(bytes)) == nullptr) {
    Status cause = still(wait, schedule_->left(), true, step, column);
    if (!cause.ok() && (*data = from_left_->front(bytes)) == nullptr) return cause;
  }
  wait.reset();
  return Status::Ok();
}

Status ShmRingExecutor::free_slot(WaitPolicy& wait, int step, size_t column, void** slot) {
  while ((*slot = to_right_->back()) == nullptr) {
    Status cause = still(wait, schedule_->right(), false, step, column);
    if (!cause.ok() && (*slot = to_right_->back()) == nullptr) return cause;
  }
  wait.reset();
  return Status::Ok();
}

Status ShmRingExecutor::run(const algo::RingSchedule& s, Call& call) {
  schedule_ = &s;
  call_ = &call;
  const size_t elem = reduce::dtype_size(call.dtype);
  const auto* send = static_cast<const uint8_t*>(call.send);
  auto* recv = static_cast<uint8_t*>(call.recv);
  WaitPolicy wait(transport_, call.until(), call.interrupt, this);
  Status status;

  for (size_t column = 0; column < s.columns() && status.ok(); ++column) {
    // The slots move without the transport: progress it once a column
    // anyway, so that posts other threads handed over (transport::post_later)
    // are made while a long ring runs, not after it.
    transport_->progress();
    // Send to the right: this rank's own chunk first (all-gather's send
    // holds only this rank's segment).
    const int first = s.first_step();
    const algo::Range own = s.chunk(s.send_segment(first), column);
    if (own.count != 0) {
      void* slot = nullptr;
      status = free_slot(wait, first, column, &slot);
      if (!status.ok()) break;
      std::memcpy(slot, send + s.send_offset(own) * elem, own.count * elem);
      to_right_->push(own.count * elem);
      bytes_sent_ += own.count * elem;
    }
    for (int step = first; step < s.end_step(); ++step) {
      // What arrives at this step is what the next step forwards (the same
      // segment): an empty chunk is skipped on both sides.
      const algo::Range in = s.chunk(s.recv_segment(step), column);
      if (in.count == 0) continue;
      const size_t bytes = in.count * elem;
      // Wait for the left.
      const void* arrived = nullptr;
      size_t arrived_bytes = 0;
      status = take(wait, step, column, &arrived, &arrived_bytes);
      if (!status.ok()) break;
      if (arrived_bytes != bytes) {
        status = wrong_chunk_length(s, call, step, column, arrived_bytes, bytes);
        break;
      }
      // A slot for the right, unless this is the last step.
      const bool forward = step + 1 < s.end_step();
      void* out = nullptr;
      if (forward) {
        status = free_slot(wait, step + 1, column, &out);
        if (!status.ok()) break;
      }
      if (s.is_reduce_step(step)) {
        const uint8_t* mine = send + s.send_offset(in) * elem;
        if (s.is_last_reduce_step(step)) {
          // Reduce into the output: this segment is final here (avg divides now).
          uint8_t* dst = recv + s.recv_offset(in) * elem;
          reduce::reduce_last(dst, mine, arrived, in.count, call.dtype, call.op, s.nranks());
          if (forward) std::memcpy(out, dst, bytes);
        } else {
          // Reduce straight into the right neighbour's slot: partial sums never touch DRAM.
          reduce::reduce(out, mine, arrived, in.count, call.dtype, call.op);
        }
      } else {
        // All-gather: keep it, and pass it on.
        std::memcpy(recv + s.recv_offset(in) * elem, arrived, bytes);
        if (forward) std::memcpy(out, arrived, bytes);
      }
      from_left_->pop();
      bytes_received_ += bytes;
      if (forward) {
        to_right_->push(bytes);
        bytes_sent_ += bytes;
      }
    }
  }
  schedule_ = nullptr;
  call_ = nullptr;
  return status;
}

}  // namespace rr::exec
