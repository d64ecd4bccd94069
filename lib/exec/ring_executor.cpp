#include "common/log.hpp"
#include "exec/ring_executor.hpp"

#include <sched.h>

#include <string>

#include "exec/stall.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"
#include "reduce/reduce.hpp"

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

Status RingExecutor::post_recv(Column& column, size_t slot, int step) {
  const algo::RingSchedule& s = *schedule_;
  transport::Completion& done = column.recv[step % 2];
  const algo::Range chunk = s.chunk(s.recv_segment(step), column.index);
  done.reset();
  if (chunk.count == 0) {  // both sides skip empty chunks
    done.done = true;
    return Status::Ok();
  }
  // Reduce steps land in a staging slot and are reduced from there; gather
  // steps land directly in their final place.
  void* dst = s.is_reduce_step(step) ? staging(slot, step)
                                     : static_cast<uint8_t*>(call_->recv) + s.recv_offset(chunk) * elem_bytes_;
  Status posted = transport_->post_recv(s.left(), collective_tag(call_->sequence, step, column.index), dst,
                                        chunk.count * elem_bytes_, &done);
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
  // The first step sends this rank's own input; later steps forward what the
  // previous step reduced (in recv, or in staging for reduce-scatter) or
  // received (in recv).
  const void* src = nullptr;
  if (step == s.first_step()) {
    src = static_cast<const uint8_t*>(call_->send) + s.send_offset(chunk) * elem_bytes_;
  } else if (s.is_reduce_step(step) && s.phases() == algo::RingPhases::kReduceScatter) {
    src = staging(slot, step - 1);
  } else {
    src = static_cast<const uint8_t*>(call_->recv) + s.recv_offset(chunk) * elem_bytes_;
  }
  Status posted = transport_->post_send(s.right(), collective_tag(call_->sequence, step, column.index), src,
                                        chunk.count * elem_bytes_, &done);
  if (posted.ok()) return posted;
  done.done = true;
  return refused(posted);
}

Status RingExecutor::start_column(Column& column, size_t slot, size_t index) {
  const algo::RingSchedule& s = *schedule_;
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

Status RingExecutor::advance(Column& column, size_t slot, bool* finished) {
  const algo::RingSchedule& s = *schedule_;
  const int steps = s.end_step();
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
    if (chunk.count != 0 && done.bytes != chunk.count * elem_bytes_) {
      return wrong_chunk_length(s, *call_, step, column.index, done.bytes, chunk.count * elem_bytes_);
    }
    if (s.is_reduce_step(step) && chunk.count != 0) {
      // dst = mine op arrived. The last reduce step also finishes avg, so the
      // owned segment leaves here final. Reduce-scatter keeps partial sums in
      // the staging slot they arrived in (recv only holds the owned segment).
      const bool scatter = s.phases() == algo::RingPhases::kReduceScatter;
      const void* source = call_->reducer ? call_->reduce_source : call_->send;
      const void* mine = static_cast<const uint8_t*>(source) + s.send_offset(chunk) * elem_bytes_;
      void* arrived = staging(slot, step);
      const bool last = s.is_last_reduce_step(step);
      void* dst = nullptr;
      if (last || !scatter) {
        dst = static_cast<uint8_t*>(call_->recv) + s.recv_offset(chunk) * elem_bytes_;
      } else {
        dst = arrived;
      }
      if (call_->reducer) {
        Status reduced = call_->reducer->reduce(dst, mine, arrived, chunk.count, call_->dtype, call_->op, last,
                                                s.nranks());
        if (!reduced.ok()) {
          return call_->error(reduced.code(), "rank " + std::to_string(s.rank()) + ": reducing chunk " +
                                                  std::to_string(column.index) + ": " + reduced.message());
        }
      } else if (last) {
        reduce::reduce_last(dst, mine, arrived, chunk.count, call_->dtype, call_->op, s.nranks());
      } else {
        reduce::reduce(dst, mine, arrived, chunk.count, call_->dtype, call_->op);
      }
    }
    column.step = step + 1;
    if (column.step < steps) RR_RETURN_IF_ERROR(post_send(column, slot, column.step));
    RR_RETURN_IF_ERROR(post_recvs(column, slot));
  }
  if (column.step == steps && sends_done(column)) {
    column.active = false;
    *finished = true;
  }
  return Status::Ok();
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
  stall.done = columns_done_;
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
  schedule_ = &schedule;
  call_ = &call;
  elem_bytes_ = reduce::dtype_size(call.dtype);
  columns_done_ = 0;
  const size_t total = schedule.columns();

  size_t next = 0;
  Status status;
  for (size_t slot = 0; slot < columns_.size() && next < total && status.ok(); ++slot) {
    status = start_column(columns_[slot], slot, next++);
  }

  WaitPolicy wait(transport_, call.until(), call.interrupt);
  while (status.ok() && columns_done_ < total) {
    const bool transport_moved = transport_->progress();
    bool moved = false;
    for (size_t slot = 0; slot < columns_.size() && status.ok(); ++slot) {
      Column& column = columns_[slot];
      if (!column.active) continue;
      const int step_before = column.step;
      bool finished = false;
      status = advance(column, slot, &finished);
      moved |= column.step != step_before || finished;
      if (finished) {
        ++columns_done_;
        if (next < total && status.ok()) status = start_column(column, slot, next++);
      }
    }
    if (!status.ok()) break;
    if (moved) {
      wait.reset();
      continue;
    }
    // No chunk moved (UCX may still be busy with wire-up, keepalives or
    // partial transfers, which must not hide a dead peer or the deadline).
    if (wait.dump_requested()) RR_LOG(LogLevel::kWarn, "dump: %s", describe_stall(Code::kOk, -1).message().c_str());
    // Only a neighbour this rank still waits on can fail it. A neighbour may
    // have finished, returned and closed legitimately: the right one when
    // this rank's last step only receives; the left one as soon as its last
    // send left, which may sit here unmatched until this rank posts the
    // receive for it. So the left counts only while a posted receive is
    // pending (posting matches what already arrived), the right while a
    // send to it is in flight or still to come (it needs every one).
    bool need_left = false;
    bool need_right = next < total;
    for (const Column& column : columns_) {
      if (!column.active) continue;
      const int step = column.step;
      need_left |= step < schedule.end_step() && column.next_recv > step && !column.recv[step % 2].done;
      need_right |= step + 1 < schedule.end_step() || !sends_done(column);
    }
    int failed_peer = -1;
    Status cause = wait.after_still_round(need_left ? schedule.left() : -1, need_right ? schedule.right() : -1,
                                          transport_moved, &failed_peer);
    if (cause.code() == Code::kTimeout) {
      status = describe_stall(Code::kTimeout, -1);
    } else if (!cause.ok()) {
      status = describe_stall(cause.code(), failed_peer, cause.message());
    }
  }
  if (!status.ok()) drain();
  schedule_ = nullptr;
  call_ = nullptr;
  return status;
}

}  // namespace rr::exec
