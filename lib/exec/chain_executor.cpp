#include "common/log.hpp"
#include "exec/chain_executor.hpp"

#include <sched.h>

#include <cstring>
#include <string>

#include "algo/chain.hpp"
#include "algo/ring.hpp"
#include "exec/stall.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"
#include "reduce/reduce.hpp"

namespace rr::exec {

ChainExecutor::ChainExecutor(transport::Transport* transport, memory::StagingPool* pool, int depth, int nranks,
                             int rank)
    : transport_(transport), pool_(pool), nranks_(nranks), rank_(rank), columns_(static_cast<size_t>(depth)) {}

Status ChainExecutor::start(Column& column, size_t slot, size_t chunk) {
  column.chunk = chunk;
  column.active = true;
  column.received = false;
  column.recv.reset();
  column.recv.done = true;
  column.send.reset();
  column.send.done = true;
  const algo::Range range = algo::split(call_->count, chunks_, chunk);
  const size_t bytes = range.count * elem_bytes_;
  const uint64_t tag = collective_tag(call_->sequence, 0, chunk);
  const int left = left_;
  const int right = right_;
  if (position_ == 0) {
    // The head of the chain sends its own data and receives nothing.
    column.received = true;
    const void* src = static_cast<const uint8_t*>(call_->send) + range.offset * elem_bytes_;
    if (!reduces_ && call_->recv != call_->send) {
      std::memcpy(static_cast<uint8_t*>(call_->recv) + range.offset * elem_bytes_, src, bytes);
    }
    Status s = transport_->post_send(right, tag, src, bytes, &column.send);
    if (s.ok()) return s;
    column.send.done = true;
    return refused(s);
  }
  void* dst = !reduces_ ? static_cast<uint8_t*>(call_->recv) + range.offset * elem_bytes_
                                                    : pool_->slot(2 * slot);
  Status s = transport_->post_recv(left, tag, dst, bytes, &column.recv);
  if (s.ok()) return s;
  column.recv.done = true;
  return refused(s);
}

Status ChainExecutor::advance(Column& column, size_t slot, bool* finished) {
  *finished = false;
  const algo::Range range = algo::split(call_->count, chunks_, column.chunk);
  const size_t bytes = range.count * elem_bytes_;
  const int left = left_;
  if (!column.received && column.recv.done) {
    if (column.recv.failed) {
      return call_->error(Code::kRemoteError, "rank " + std::to_string(rank_) + " failed to receive chunk " +
                                                  std::to_string(column.chunk) + " from rank " + std::to_string(left) +
                                                  ": " + transport_->describe_error(column.recv));
    }
    if (column.recv.bytes != bytes) {
      return call_->error(Code::kRemoteError,
                          "rank " + std::to_string(left) + " sent " + std::to_string(column.recv.bytes) +
                              " bytes for chunk " + std::to_string(column.chunk) + ", rank " + std::to_string(rank_) +
                              " expected " + std::to_string(bytes) +
                              " (do the ranks pass the same count, datatype and root?)");
    }
    column.received = true;
    const void* forward = static_cast<uint8_t*>(call_->recv) + range.offset * elem_bytes_;
    if (reduces_) {
      void* staged = pool_->slot(2 * slot);
      const void* mine = static_cast<const uint8_t*>(call_->send) + range.offset * elem_bytes_;
      if (position_ == nranks_ - 1) {
        // The root: the last addition, and avg's division, into its output.
        reduce::reduce_last(static_cast<uint8_t*>(call_->recv) + range.offset * elem_bytes_, mine, staged,
                            range.count, call_->dtype, call_->op, nranks_);
      } else {
        reduce::reduce(staged, mine, staged, range.count, call_->dtype, call_->op);
      }
      forward = staged;
    }
    if (position_ < nranks_ - 1) {
      Status s = transport_->post_send(right_, collective_tag(call_->sequence, 0, column.chunk),
                                       forward, bytes, &column.send);
      if (!s.ok()) {
        column.send.done = true;
        return refused(s);
      }
    }
  }
  if (column.received && column.send.done) {
    if (column.send.failed) {
      return call_->error(Code::kRemoteError, "rank " + std::to_string(rank_) + " failed to send chunk " +
                                                  std::to_string(column.chunk) + " to rank " + std::to_string(right_) +
                                                  ": " + transport_->describe_error(column.send));
    }
    column.active = false;
    *finished = true;
  }
  return Status::Ok();
}

Status ChainExecutor::stall(Code code, const std::string& detail) const {
  const Column* oldest = nullptr;
  for (const Column& c : columns_) {
    if (c.active && (!oldest || c.chunk < oldest->chunk)) oldest = &c;
  }
  Stall stall;
  stall.rank = rank_;
  stall.done = chunks_done_;
  stall.total = chunks_;
  stall.unit = "chunks";
  if (oldest) {
    stall.wait = oldest->received ? Stall::Wait::kTake : Stall::Wait::kChunk;
    stall.peer = oldest->received ? right_ : left_;
    stall.chunk = oldest->chunk;
  }
  return stalled(*call_, code, stall, detail);
}

void ChainExecutor::drain() {
  for (Column& c : columns_) {
    if (c.active && !c.recv.done) transport_->cancel(&c.recv);
  }
  const bool right_failed = !transport_->peer_status(right_).ok();
  const auto limit = Clock::now() + kDrainLimit;
  for (;;) {
    bool pending = false;
    for (const Column& c : columns_) {
      if (!c.active) continue;
      pending |= !c.recv.done || (!c.send.done && !right_failed);
    }
    if (!pending || Clock::now() > limit) break;
    if (!transport_->progress()) sched_yield();
  }
  for (Column& c : columns_) c.active = false;
}

Status ChainExecutor::refused(const Status& posted) const {
  return call_->error(posted.code(), "rank " + std::to_string(rank_) + ": " + posted.message());
}

Status ChainExecutor::run(Call& call, size_t chunk_elems) {
  call_ = &call;
  reduces_ = call.collective == Collective::kReduce;
  elem_bytes_ = reduce::dtype_size(call.dtype);
  chunks_ = (call.count + chunk_elems - 1) / chunk_elems;
  chunks_done_ = 0;
  const algo::ChainSchedule schedule(nranks_, rank_, call.root, reduces_, call.order);
  left_ = schedule.left();
  right_ = schedule.right();
  position_ = schedule.position();

  size_t next = 0;
  Status status;
  for (size_t slot = 0; slot < columns_.size() && next < chunks_ && status.ok(); ++slot) {
    status = start(columns_[slot], slot, next++);
  }
  WaitPolicy wait(transport_, call.until(), call.interrupt);
  while (status.ok() && chunks_done_ < chunks_) {
    const bool transport_moved = transport_->progress();
    bool moved = false;
    for (size_t slot = 0; slot < columns_.size() && status.ok(); ++slot) {
      Column& column = columns_[slot];
      if (!column.active) continue;
      const bool was_received = column.received;
      bool finished = false;
      status = advance(column, slot, &finished);
      moved |= finished || column.received != was_received;
      if (finished) {
        ++chunks_done_;
        if (next < chunks_ && status.ok()) status = start(column, slot, next++);
      }
    }
    if (!status.ok()) break;
    if (moved) {
      wait.reset();
      continue;
    }
    if (wait.dump_requested()) RR_LOG(LogLevel::kWarn, "dump: %s", stall(Code::kOk, "").message().c_str());
    // Only a neighbour this rank still waits on can fail it. The head
    // receives nothing, so its left neighbour (the tail) may have finished
    // and left; the left one may also have sent its last chunk and left
    // before this rank posted the receive that matches it. So the left
    // counts only while a posted receive is pending, the right (which needs
    // every chunk) while a send to it is in flight or still to come.
    bool need_left = false;
    bool need_right = position_ != nranks_ - 1 && next < chunks_;
    for (const Column& column : columns_) {
      if (!column.active) continue;
      need_left |= position_ != 0 && !column.received && !column.recv.done;
      need_right |= position_ != nranks_ - 1 && (!column.received || !column.send.done);
    }
    int failed_peer = -1;
    Status cause = wait.after_still_round(need_left ? left_ : -1,
                                          need_right ? right_ : -1, transport_moved, &failed_peer);
    if (cause.code() == Code::kTimeout) {
      status = stall(Code::kTimeout, "");
    } else if (!cause.ok()) {
      status = stall(cause.code(), cause.message());
    }
  }
  if (!status.ok()) drain();
  call_ = nullptr;
  return status;
}

}  // namespace rr::exec
