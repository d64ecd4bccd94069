#include "exec/ring_executor.hpp"

#include <sched.h>

#include <string>

#include "exec/stall.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"


namespace rr::exec {

Status wrong_chunk_length(const algo::RingSchedule& s, const Call& call, int step, size_t column, size_t got,
                          size_t expected) {
  return call.error(Code::kRemoteError,
                    "rank " + std::to_string(s.left()) + " sent " + std::to_string(got) + " bytes for chunk " +
                        std::to_string(column) + " of " + s.phase_name(step) + " step " +
                        std::to_string(s.phase_step(step)) + ", rank " + std::to_string(s.rank()) + " expected " +
                        std::to_string(expected) + " (do the ranks pass the same count and datatype?)");
}

RingExecutor::RingExecutor(transport::Transport* transport, memory::StagingPool* pool, int depth,
                           int nranks)
    : transport_(transport),
      pool_(pool),
      columns_(static_cast<size_t>(depth)),
      sends_(static_cast<size_t>(depth) * static_cast<size_t>(nranks > 1 ? 2 * (nranks - 1) : 1)) {
  const size_t steps = static_cast<size_t>(nranks > 1 ? 2 * (nranks - 1) : 1);
  for (size_t slot = 0; slot < columns_.size(); ++slot) columns_[slot].sends = &sends_[slot * steps];
}

void* RingExecutor::staging(size_t slot, int step) const {
  return pool_->slot(2 * slot + static_cast<size_t>(step % 2));
}

void* RingExecutor::landing(size_t slot, int step, const algo::Range& chunk) const {
  return algo::reduces(schedule_->primitive(step)) ? staging(slot, step) : buffers_->output(chunk);
}

void* RingExecutor::forwarded_from(size_t slot, int step, const algo::Range& chunk) const {
  const bool partial = schedule_->primitive(step) == algo::Primitive::kRecvReduceSend;
  return partial && schedule_->phases() == algo::RingPhases::kReduceScatter ? staging(slot, step)
                                                                             : buffers_->output(chunk);
}

Status RingExecutor::post_recv(Column& column, size_t slot, int step) {
  const algo::RingSchedule& s = *schedule_;
  transport::Completion& done = column.recv[step % 2];
  const algo::Range chunk = s.chunk(s.recv_segment(step), column.index);
  done.reset();
  if (chunk.count == 0) {  // both sides skip empty chunks
    done.done = true;
    return Status::Ok();
  }
  Status posted = transport_->post_recv(s.left(), collective_tag(call_->sequence, step, column.index),
                                        landing(slot, step, chunk), buffers_->bytes(chunk), &done);
  if (posted.ok()) return posted;
  done.done = true;  // nothing in flight to wait for
  return refused(posted);
}

Status RingExecutor::post_recvs(Column& column, size_t slot) {
  const algo::RingSchedule& s = *schedule_;
  // Keep the next two receives posted so the left neighbour's chunks land
  // without an unexpected-message copy. In reduce-scatter the send of step k
  // reads the slot step k + 1 would receive into: wait for it to retire.
  while (column.next_recv < s.end_step() && column.next_recv <= column.step + 1) {
    const int k = column.next_recv;
    const bool slot_read_by_send = s.phases() == algo::RingPhases::kReduceScatter && k - 1 > s.first_step();
    if (slot_read_by_send && !column.sends[k - 1].done) break;
    RR_RETURN_IF_ERROR(post_recv(column, slot, k));
    ++column.next_recv;
  }
  return Status::Ok();
}

Status RingExecutor::post_send(Column& column, size_t slot, int step) {
  const algo::RingSchedule& s = *schedule_;
  transport::Completion& done = column.sends[step];
  const algo::Range chunk = s.chunk(s.send_segment(step), column.index);
  done.reset();
  if (chunk.count == 0) {
    done.done = true;
    return Status::Ok();
  }
  // The first step sends this rank's own input (the column's kSend); later
  // steps send what the previous step's primitive left to forward (the
  // chunk sent at step k is the one received at step k - 1).
  const void* src = step == s.first_step() ? buffers_->input(chunk) : forwarded_from(slot, step - 1, chunk);
  Status posted = transport_->post_send(s.right(), collective_tag(call_->sequence, step, column.index), src,
                                        buffers_->bytes(chunk), &done);
  if (posted.ok()) return posted;
  done.done = true;
  return refused(posted);
}

Status RingExecutor::start(size_t slot, size_t index) {
  const algo::RingSchedule& s = *schedule_;
  Column& column = columns_[slot];
  column.index = index;
  column.step = s.first_step();
  column.next_recv = s.first_step();
  column.active = true;
  // A step whose send is not posted yet has nothing in flight: drain() and
  // sends_done() must not wait for it.
  for (int step = 0; step < s.steps(); ++step) {
    column.sends[step].reset();
    column.sends[step].done = true;
  }
  for (auto& r : column.recv) {
    r.reset();
    r.done = true;
  }
  RR_RETURN_IF_ERROR(post_recvs(column, slot));
  return post_send(column, slot, s.first_step());
}

bool RingExecutor::sends_done(const Column& column) const {
  for (int step = 0; step < schedule_->steps(); ++step) {
    if (!column.sends[step].done) return false;
  }
  return true;
}

Status RingExecutor::advance(size_t slot, bool* moved, bool* finished) {
  const algo::RingSchedule& s = *schedule_;
  Column& column = columns_[slot];
  const int steps = s.end_step();
  const int step_before = column.step;
  *finished = false;
  while (column.step < steps) {
    const int step = column.step;
    transport::Completion& done = column.recv[step % 2];
    if (column.next_recv <= step) {
      // Its slot is still being sent from; post it once that send retired.
      RR_RETURN_IF_ERROR(post_recvs(column, slot));
      if (column.next_recv <= step) break;
    }
    if (!done.done) break;
    const algo::Range chunk = s.chunk(s.recv_segment(step), column.index);
    if (done.failed) {
      return call_->error(Code::kRemoteError, "rank " + std::to_string(s.rank()) + " failed to receive chunk " +
                                                  std::to_string(column.index) + " of " + s.phase_name(step) +
                                                  " step " + std::to_string(s.phase_step(step)) + " from rank " +
                                                  std::to_string(s.left()) + ": " + transport_->describe_error(done));
    }
    if (chunk.count != 0 && done.bytes != buffers_->bytes(chunk)) {
      return wrong_chunk_length(s, *call_, step, column.index, done.bytes, buffers_->bytes(chunk));
    }
    if (chunk.count != 0) {
      // The step's primitive, where the chunk landed. The last reduce step
      // also finishes avg, so the owned segment leaves here final.
      const algo::Primitive p = s.primitive(step);
      ChunkPlaces at;
      if (algo::reduces(p)) at.mine = buffers_->mine(chunk);  // all-gather's input: its own segment only
      at.arrived = landing(slot, step, chunk);
      if (algo::keeps(p)) at.keep = buffers_->output(chunk);
      if (algo::forwards(p)) at.forward = forwarded_from(slot, step, chunk);
      at.count = chunk.count;
      Status ran = run_primitive(p, *call_, s.nranks(), at);
      if (!ran.ok()) {
        return call_->error(ran.code(), "rank " + std::to_string(s.rank()) + ": reducing chunk " +
                                            std::to_string(column.index) + ": " + ran.message());
      }
    }
    column.step = step + 1;
    if (column.step < steps) RR_RETURN_IF_ERROR(post_send(column, slot, column.step));
    RR_RETURN_IF_ERROR(post_recvs(column, slot));
  }
  *moved = column.step != step_before;
  if (column.step == steps && sends_done(column)) {
    column.active = false;
    *finished = true;
  }
  return Status::Ok();
}

void RingExecutor::needs(bool more_columns, bool* left, bool* right) const {
  // A neighbour may have finished, returned and closed legitimately: the
  // right one when this rank's last step only receives; the left one as
  // soon as its last send left, which may sit here unmatched until this
  // rank posts the receive for it (posting matches what already arrived).
  *left = false;
  *right = more_columns;
  for (const Column& column : columns_) {
    if (!column.active) continue;
    const int step = column.step;
    *left |= step < schedule_->end_step() && column.next_recv > step && !column.recv[step % 2].done;
    *right |= step + 1 < schedule_->end_step() || !sends_done(column);
  }
}

Status RingExecutor::describe_stall(Code code, int failed_peer, const std::string& cause) const {
  const algo::RingSchedule& s = *schedule_;
  // Name the oldest column still in flight: that is the chunk the ring is stuck on.
  const Column* oldest = nullptr;
  for (const Column& column : columns_) {
    if (column.active && (!oldest || column.index < oldest->index)) oldest = &column;
  }
  Stall stall;
  stall.rank = s.rank();
  stall.done = columns_done();
  stall.total = s.columns();
  if (oldest) {
    const bool receiving = oldest->step < s.end_step() && failed_peer != s.right();
    const int step = oldest->step < s.end_step() ? oldest->step : s.end_step() - 1;
    stall.wait = receiving ? Stall::Wait::kChunk : Stall::Wait::kTake;
    stall.peer = receiving ? s.left() : s.right();
    stall.chunk = oldest->index;
    stall.phase = s.phase_name(step);
    stall.phase_step = s.phase_step(step);
  }
  return stalled(*call_, code, stall, cause);
}

void RingExecutor::drain() {
  // Cancel what we still expect; give sends a bounded time to retire. A send
  // that cannot retire leaves the transport holding a user buffer: the
  // communicator must not be used again (stranded_).
  for (Column& column : columns_) {
    if (!column.active) continue;
    for (auto& r : column.recv) transport_->cancel(&r);
  }
  // Sends to a dead neighbour will never retire: waiting for them only delays the error.
  const bool right_failed = !transport_->peer_status(schedule_->right()).ok();
  const auto limit = Clock::now() + kDrainLimit;
  for (;;) {
    bool recvs_pending = false;
    bool sends_pending = false;
    for (Column& column : columns_) {
      if (!column.active) continue;
      for (auto& r : column.recv) recvs_pending |= !r.done;
      for (int step = 0; step < schedule_->steps(); ++step) sends_pending |= !column.sends[step].done;
    }
    if (!recvs_pending && (!sends_pending || right_failed)) {
      stranded_ = sends_pending;
      break;
    }
    if (Clock::now() > limit) {
      stranded_ = true;
      break;
    }
    if (!transport_->progress()) sched_yield();
  }
  for (Column& column : columns_) column.active = false;
}

Status RingExecutor::refused(const Status& posted) const {
  return call_->error(posted.code(), "rank " + std::to_string(schedule_->rank()) + ": " + posted.message());
}

Status RingExecutor::run(const algo::RingSchedule& schedule, Call& call) {
  const RingBuffers buffers(schedule, call);
  schedule_ = &schedule;
  call_ = &call;
  buffers_ = &buffers;
  for (Column& column : columns_) column.active = false;
  Status status = run_columns(transport_, call, columns_.size(), schedule.columns(), schedule.left(),
                              schedule.right());
  schedule_ = nullptr;
  call_ = nullptr;
  buffers_ = nullptr;
  return status;
}

}  // namespace rr::exec
