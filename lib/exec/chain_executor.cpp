#include "exec/chain_executor.hpp"

#include <sched.h>

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

ChunkPlaces ChainExecutor::places(size_t slot, size_t chunk) const {
  const algo::Range range = algo::split(call_->count, chunks_, chunk);
  const size_t offset = range.offset * elem_bytes_;
  ChunkPlaces at;
  at.count = range.count;
  // This rank's input is read by the head's send and by reductions (a
  // broadcast's other ranks have none).
  if (!algo::receives(primitive_) || algo::reduces(primitive_)) {
    at.mine = static_cast<const uint8_t*>(call_->send) + offset;
  }
  // Broadcast receives straight into the output and sends on from there; a
  // reduction arrives in a staging slot and its partial result is sent on
  // from the same slot.
  void* output = call_->recv ? static_cast<uint8_t*>(call_->recv) + offset : nullptr;
  if (algo::receives(primitive_)) at.arrived = algo::reduces(primitive_) ? pool_->slot(2 * slot) : output;
  if (algo::keeps(primitive_)) at.keep = output;
  // What is sent on is what arrived (in the output, or the partial result
  // in the staging slot), or at the head this rank's input.
  if (algo::forwards(primitive_)) at.forward = const_cast<void*>(algo::receives(primitive_) ? at.arrived : at.mine);
  return at;
}

Status ChainExecutor::send_on(Column& column, const ChunkPlaces& at) {
  Status s = transport_->post_send(right_, collective_tag(call_->sequence, 0, column.chunk), at.forward,
                                   at.count * elem_bytes_, &column.send);
  if (s.ok()) return s;
  column.send.done = true;
  return refused(s);
}

Status ChainExecutor::start(size_t slot, size_t chunk) {
  Column& column = columns_[slot];
  column.chunk = chunk;
  column.active = true;
  column.received = false;
  column.recv.reset();
  column.recv.done = true;
  column.send.reset();
  column.send.done = true;
  const ChunkPlaces at = places(slot, chunk);
  if (!algo::receives(primitive_)) {
    // The head of the chain sends its own data and receives nothing.
    column.received = true;
    RR_RETURN_IF_ERROR(run_primitive(primitive_, *call_, nranks_, at));
    return send_on(column, at);
  }
  Status s = transport_->post_recv(left_, collective_tag(call_->sequence, 0, chunk), const_cast<void*>(at.arrived),
                                   at.count * elem_bytes_, &column.recv);
  if (s.ok()) return s;
  column.recv.done = true;
  return refused(s);
}

Status ChainExecutor::advance(size_t slot, bool* moved, bool* finished) {
  Column& column = columns_[slot];
  *moved = false;
  *finished = false;
  if (!column.received && column.recv.done) {
    const ChunkPlaces at = places(slot, column.chunk);
    const size_t bytes = at.count * elem_bytes_;
    if (column.recv.failed) {
      return call_->error(Code::kRemoteError, "rank " + std::to_string(rank_) + " failed to receive chunk " +
                                                  std::to_string(column.chunk) + " from rank " + std::to_string(left_) +
                                                  ": " + transport_->describe_error(column.recv));
    }
    if (column.recv.bytes != bytes) {
      return call_->error(Code::kRemoteError,
                          "rank " + std::to_string(left_) + " sent " + std::to_string(column.recv.bytes) +
                              " bytes for chunk " + std::to_string(column.chunk) + ", rank " + std::to_string(rank_) +
                              " expected " + std::to_string(bytes) +
                              " (do the ranks pass the same count, datatype and root?)");
    }
    column.received = true;
    *moved = true;
    RR_RETURN_IF_ERROR(run_primitive(primitive_, *call_, nranks_, at));
    if (algo::forwards(primitive_)) RR_RETURN_IF_ERROR(send_on(column, at));
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

void ChainExecutor::needs(bool more_columns, bool* left, bool* right) const {
  // The head receives nothing, so its left neighbour (the tail) may have
  // finished and left; the left one may also have sent its last chunk and
  // left before this rank posted the receive that matches it. The end sends
  // nothing, so its right neighbour (the head) may have left too.
  const bool has_left = algo::receives(primitive_);
  const bool has_right = algo::forwards(primitive_);
  *left = false;
  *right = has_right && more_columns;
  for (const Column& column : columns_) {
    if (!column.active) continue;
    *left |= has_left && !column.received && !column.recv.done;
    *right |= has_right && (!column.received || !column.send.done);
  }
}

Status ChainExecutor::describe_stall(Code code, int /*failed_peer*/, const std::string& cause) const {
  const Column* oldest = nullptr;
  for (const Column& c : columns_) {
    if (c.active && (!oldest || c.chunk < oldest->chunk)) oldest = &c;
  }
  Stall stall;
  stall.rank = rank_;
  stall.done = columns_done();
  stall.total = chunks_;
  stall.unit = "chunks";
  if (oldest) {
    stall.wait = oldest->received ? Stall::Wait::kTake : Stall::Wait::kChunk;
    stall.peer = oldest->received ? right_ : left_;
    stall.chunk = oldest->chunk;
  }
  return stalled(*call_, code, stall, cause);
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
  elem_bytes_ = reduce::dtype_size(call.dtype);
  chunks_ = (call.count + chunk_elems - 1) / chunk_elems;
  const algo::ChainSchedule schedule(nranks_, rank_, call.root, call.collective == Collective::kReduce, call.order);
  left_ = schedule.left();
  right_ = schedule.right();
  primitive_ = schedule.primitive();
  for (Column& column : columns_) column.active = false;
  Status status = run_columns(transport_, call, columns_.size(), chunks_, left_, right_);
  call_ = nullptr;
  return status;
}

}  // namespace rr::exec
