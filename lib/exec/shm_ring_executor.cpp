#include "exec/shm_ring_executor.hpp"

#include <string>

#include "exec/stall.hpp"
#include "exec/primitives.hpp"
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
  const RingBuffers buffers(s, call);
  WaitPolicy wait(transport_, call.until(), call.interrupt, this);
  Status status;
  // A large output written out of place is not read by this call again:
  // written past the caches, it costs no read before each line's write.
  const bool stream = stream_bytes_ != 0 && call.send != call.recv &&
                      s.count() * reduce::dtype_size(call.dtype) >= stream_bytes_;

  for (size_t column = 0; column < s.columns() && status.ok(); ++column) {
    // The slots move without the transport: progress it once a column
    // anyway, so that posts other threads handed over (transport::post_later)
    // are made while a long ring runs, not after it.
    transport_->progress();
    // The column's kSend: this rank's own chunk into the right neighbour's
    // ring (all-gather's send holds only this rank's segment).
    const int first = s.first_step();
    const algo::Range own = s.chunk(s.send_segment(first), column);
    if (own.count != 0) {
      ChunkPlaces at;
      at.mine = buffers.input(own);
      at.count = own.count;
      status = free_slot(wait, first, column, &at.forward);
      if (!status.ok()) break;
      status = run_primitive(algo::Primitive::kSend, call, s.nranks(), at, &traffic_);
      if (!status.ok()) break;
      to_right_->push(buffers.bytes(own));
      bytes_sent_ += buffers.bytes(own);
    }
    for (int step = first; step < s.end_step(); ++step) {
      // What arrives at this step is what the next step forwards (the same
      // segment): an empty chunk is skipped on both sides.
      const algo::Range in = s.chunk(s.recv_segment(step), column);
      if (in.count == 0) continue;
      const size_t bytes = buffers.bytes(in);
      const algo::Primitive p = s.primitive(step);
      // Wait for the left; the chunk is read where it lies in its slot.
      ChunkPlaces at;
      at.count = in.count;
      size_t arrived_bytes = 0;
      status = take(wait, step, column, &at.arrived, &arrived_bytes);
      if (!status.ok()) break;
      if (arrived_bytes != bytes) {
        status = wrong_chunk_length(s, call, step, column, arrived_bytes, bytes);
        break;
      }
      // The result goes straight into the right neighbour's slot: partial
      // sums never touch DRAM, and only final chunks are written to the
      // output, each once (algo/memory_traffic.hpp counts it).
      if (algo::forwards(p)) {
        status = free_slot(wait, step + 1, column, &at.forward);
        if (!status.ok()) break;
      }
      // Only a reduction reads this rank's values (an all-gather's input
      // holds its own segment alone: other chunks have no place there).
      if (algo::reduces(p)) at.mine = buffers.mine(in);
      if (algo::keeps(p)) at.keep = buffers.output(in);
      at.stream_keep = stream;
      status = run_primitive(p, call, s.nranks(), at, &traffic_);
      if (!status.ok()) break;
      from_left_->pop();
      bytes_received_ += bytes;
      if (algo::forwards(p)) {
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
