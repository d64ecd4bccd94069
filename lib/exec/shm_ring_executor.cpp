#include "exec/shm_ring_executor.hpp"

#include <string>

#include "exec/primitives.hpp"
#include "exec/stall.hpp"
#include "reduce/reduce.hpp"

namespace rr::exec {

// One run of the ring on the slot rings: column by column, the column's
// kSend of this rank's own chunk, then each step's chunk from the left,
// reduced or copied where it lies, into the right neighbour's slot. A round
// goes as far as the rings allow and stops where a chunk has not arrived or
// the right ring is full: what it waits for is then kept for needs(),
// stalled() and the sleeper.
class ShmRingExecutor::Steps final : public Algorithm, private Sleeper {
 public:
  Steps(ShmRingExecutor* exec, const algo::RingSchedule& schedule, Call& call)
      : exec_(exec),
        s_(schedule),
        call_(call),
        buffers_(schedule, call),
        // A large output written out of place is not read by this call
        // again: written past the caches, it costs no read before each
        // line's write.
        stream_(exec->stream_bytes_ != 0 && call.send != call.recv &&
                schedule.count() * reduce::dtype_size(call.dtype) >= exec->stream_bytes_) {}

  Status post(const std::string&) override { return Status::Ok(); }

  Status progress(const std::string&, Round* round) override {
    while (column_ < s_.columns()) {
      if (step_ < s_.first_step()) {
        if (!column_started_) {
          // The slots move without the transport: progress it once a column
          // anyway, so that posts other threads handed over
          // (transport::post_later) are made while a long ring runs, not after it.
          round->transport_moved |= exec_->transport_->progress();
          column_started_ = true;
        }
        RR_RETURN_IF_ERROR(send_own(round));
        if (step_ < s_.first_step()) return still(round);
      }
      if (step_ == s_.end_step()) {
        ++column_;
        step_ = s_.first_step() - 1;
        column_started_ = false;
        continue;
      }
      RR_RETURN_IF_ERROR(take_step(round));
      if (waiting_) return still(round);
    }
    round->done = true;
    return Status::Ok();
  }

  void needs(int* from, int* to) const override {
    *from = receiving_ ? s_.left() : -1;
    *to = receiving_ ? -1 : s_.right();
  }

  Status stalled(const std::string&, Code code, int, const std::string& cause) const override {
    Stall stall;
    stall.rank = s_.rank();
    stall.wait = receiving_ ? Stall::Wait::kChunk : Stall::Wait::kRoom;
    stall.peer = receiving_ ? s_.left() : s_.right();
    stall.chunk = column_;
    stall.phase = s_.phase_name(wait_step_);
    stall.phase_step = s_.phase_step(wait_step_);
    stall.path = "same-host shared memory";
    return exec::stalled(call_, code, stall, code == Code::kTimeout ? std::string() : cause);
  }

  // The rings hold what they hold: nothing to cancel. A failure leaves them
  // out of step, and the communicator runs nothing on them again.
  void cancel() override {}

  Sleeper* sleeper() override { return this; }

 private:
  // The column's kSend: this rank's own chunk into the right neighbour's
  // ring (all-gather's send holds only this rank's segment). step_ moves to
  // the first step once it is done, or when there is nothing to send.
  Status send_own(Round* round) {
    const int first = s_.first_step();
    const algo::Range own = s_.chunk(s_.send_segment(first), column_);
    if (own.count != 0) {
      ChunkPlaces at;
      at.mine = buffers_.input(own);
      at.count = own.count;
      at.forward = exec_->to_right_->back();
      if (at.forward == nullptr) return wait_for(false, first);
      RR_RETURN_IF_ERROR(run_primitive(algo::Primitive::kSend, call_, s_.nranks(), at, &exec_->traffic_));
      exec_->to_right_->push(buffers_.bytes(own));
      exec_->bytes_sent_ += buffers_.bytes(own);
      round->moved = true;
    }
    step_ = first;
    waiting_ = false;
    return Status::Ok();
  }

  // Step step_ of the column: the chunk from the left, reduced or copied
  // where it lies into the right neighbour's slot (partial sums never touch
  // DRAM) and, for a final chunk, the output (algo/memory_traffic.hpp
  // counts it). What arrives at a step is what the next step forwards (the
  // same segment): an empty chunk is skipped on both sides.
  Status take_step(Round* round) {
    const algo::Range in = s_.chunk(s_.recv_segment(step_), column_);
    waiting_ = false;
    if (in.count == 0) {
      ++step_;
      return Status::Ok();
    }
    const size_t bytes = buffers_.bytes(in);
    const algo::Primitive p = s_.primitive(step_);
    ChunkPlaces at;
    at.count = in.count;
    size_t arrived_bytes = 0;
    at.arrived = exec_->from_left_->front(&arrived_bytes);
    if (at.arrived == nullptr) return wait_for(true, step_);
    if (arrived_bytes != bytes) return wrong_chunk_length(s_, call_, step_, column_, arrived_bytes, bytes);
    if (algo::forwards(p)) {
      at.forward = exec_->to_right_->back();
      if (at.forward == nullptr) return wait_for(false, step_ + 1);
    }
    // Only a reduction reads this rank's values (an all-gather's input
    // holds its own segment alone: other chunks have no place there).
    if (algo::reduces(p)) at.mine = buffers_.mine(in);
    if (algo::keeps(p)) at.keep = buffers_.output(in);
    at.stream_keep = stream_;
    RR_RETURN_IF_ERROR(run_primitive(p, call_, s_.nranks(), at, &exec_->traffic_));
    exec_->from_left_->pop();
    exec_->bytes_received_ += bytes;
    if (algo::forwards(p)) {
      exec_->to_right_->push(bytes);
      exec_->bytes_sent_ += bytes;
    }
    round->moved = true;
    ++step_;
    return Status::Ok();
  }

  // The round stops: it waits for a chunk from the left (`receiving`) or
  // for room in the right neighbour's ring, at `step`.
  Status wait_for(bool receiving, int step) {
    waiting_ = true;
    receiving_ = receiving;
    wait_step_ = step;
    return Status::Ok();
  }

  // Sleeper: on the ring the round stopped at, until it moves.
  void sleep(int timeout_ms) override {
    if (receiving_) {
      exec_->from_left_->wait_readable(timeout_ms);
    } else {
      exec_->to_right_->wait_writable(timeout_ms);
    }
  }

  // A round that ends waiting: it progresses the transport when StillRounds
  // says (exec/algorithm.hpp).
  Status still(Round* round) {
    if (round->moved) {
      still_rounds_.moved();
    } else if (still_rounds_.transport_due()) {
      round->transport_moved |= exec_->transport_->progress();
    }
    return Status::Ok();
  }

  ShmRingExecutor* exec_;
  const algo::RingSchedule& s_;
  Call& call_;
  const RingBuffers buffers_;
  const bool stream_;
  size_t column_ = 0;
  int step_ = s_.first_step() - 1;  // first_step() - 1: the column's own send is next
  bool column_started_ = false;
  bool waiting_ = false;
  bool receiving_ = true;
  int wait_step_ = 0;
  StillRounds still_rounds_;
};

ShmRingExecutor::ShmRingExecutor(transport::Transport* transport, transport::shm::SlotRing* from_left,
                                 transport::shm::SlotRing* to_right)
    : transport_(transport), from_left_(from_left), to_right_(to_right) {}

Status ShmRingExecutor::run(const algo::RingSchedule& s, Call& call) {
  Steps steps(this, s, call);
  return drive(steps, named_by_the_algorithm(), call, transport_);
}

}  // namespace rr::exec
