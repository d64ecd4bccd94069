#include "coll/recursive_doubling.hpp"

#include <algorithm>
#include <cstring>

#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr::coll {

namespace {
constexpr size_t kHeader = wire::kOpHeaderBytes;
}  // namespace

RecursiveDoubling::RecursiveDoubling(transport::Transport* transport, memory::StagingPool* pool, int rank, int size,
                                     bool check_arguments)
    : BatchSteps(transport), pool_(pool), rank_(rank), size_(size), check_arguments_(check_arguments), plan_(size, rank) {
  batch_.reserve(2);
  auto add = [&](Kind kind, int peer, int tag_step) { steps_[nsteps_++] = Step{kind, peer, tag_step}; };
  if (plan_.sits_out_for() >= 0) {
    // Hand the input over, then take the result back.
    add(Kind::kHandOver, plan_.sits_out_for(), 0);
    add(Kind::kTakeBack, plan_.sits_out_for(), 1);
    return;
  }
  if (plan_.folds_in() >= 0) add(Kind::kFoldIn, plan_.folds_in(), 0);
  for (int round = 0; round < plan_.rounds(); ++round) add(Kind::kExchange, plan_.partner(round), 2 + round);
  if (plan_.folds_in() >= 0) add(Kind::kFoldOut, plan_.folds_in(), 1);
}

void RecursiveDoubling::prepare(const exec::Call& call, const wire::OpHeader& header) {
  call_ = call;
  header_ = header;
  elem_ = reduce::dtype_size(call.dtype);
  // A frame's data must fit a slot after the header.
  piece_elems_ = std::max<size_t>(1, (pool_->slot_bytes() - kHeader) / elem_);
}

uint64_t RecursiveDoubling::tag(int step) const {
  // The first message of the call travels on the operation header's tag, as
  // the other collectives' headers do: a peer that called one of those gets
  // this frame where it expects a header, and fails at once instead of waiting.
  const bool first_message = piece_ == 0 && (step == 0 || step == 2);
  return exec::collective_tag(call_.sequence, first_message ? exec::kHeaderStep : step, piece_);
}

Status RecursiveDoubling::post(const std::string& what) {
  batch_.clear();  // a failed call leaves its transfers
  wire::encode_header(header_, static_cast<uint8_t*>(pool_->slot(1)));
  if (call_.send != call_.recv && call_.count > 0) std::memcpy(call_.recv, call_.send, call_.count * elem_);
  piece_ = 0;
  first_ = 0;
  step_ = 0;
  ended_ = nsteps_ == 0 || call_.count == 0;  // one rank, or nothing to reduce
  return ended_ ? Status::Ok() : start_step(what);
}

Status RecursiveDoubling::start_step(const std::string& what) {
  const Step& step = steps_[step_];
  uint8_t* in = static_cast<uint8_t*>(pool_->slot(0));
  uint8_t* out = static_cast<uint8_t*>(pool_->slot(1));
  const size_t bytes = std::min(piece_elems_, call_.count - first_) * elem_;
  const uint64_t t = tag(step.tag_step);
  if (step.kind != Kind::kHandOver && step.kind != Kind::kFoldOut) {
    batch_.add_recv_up_to(step.peer, t, in, pool_->slot_bytes());
  }
  if (step.kind != Kind::kTakeBack && step.kind != Kind::kFoldIn) {
    std::memcpy(out + kHeader, static_cast<uint8_t*>(call_.recv) + first_ * elem_, bytes);
    batch_.add_send(step.peer, t, out, kHeader + bytes);
  }
  return batch_.post(what);
}

Status RecursiveDoubling::check_frame(const std::string& what, int peer, size_t got, size_t bytes) const {
  const uint8_t* in = static_cast<const uint8_t*>(pool_->slot(0));
  wire::OpHeader theirs;
  Status parsed = got < kHeader ? RemoteError("a message of " + std::to_string(got) + " bytes")
                                : wire::decode_header(in, kHeader, &theirs);
  if (!parsed.ok()) return RemoteError(what + ": rank " + std::to_string(peer) + " sent " + parsed.message());
  if (check_arguments_ && theirs != header_) return wire::disagreement(header_, theirs, rank_, peer);
  if (got != kHeader + bytes) {
    return InvalidUsage(what + ": rank " + std::to_string(peer) + " sent " + std::to_string(got - kHeader) +
                        " bytes, rank " + std::to_string(rank_) + " expected " + std::to_string(bytes) +
                        (got == kHeader ? " (it checked the call's arguments the ring's way: do the ranks set RR_ALGO, "
                                          "RR_MODEL_* or RR_CHUNK_BYTES differently, or pass different "
                                          "algorithms in the call's rrCollConfig_t?)"
                                        : " (do the ranks pass the same count, or set RR_CHUNK_BYTES differently?)"));
  }
  return Status::Ok();
}

Status RecursiveDoubling::finish_step(const std::string& what) {
  const Step& step = steps_[step_];
  if (step.kind == Kind::kHandOver || step.kind == Kind::kFoldOut) return Status::Ok();
  const size_t n = std::min(piece_elems_, call_.count - first_);
  const size_t got = batch_.transfer(0).done.bytes;  // the receive comes first
  RR_RETURN_IF_ERROR(check_frame(what, step.peer, got, n * elem_));
  uint8_t* data = static_cast<uint8_t*>(call_.recv) + first_ * elem_;
  const uint8_t* theirs = static_cast<const uint8_t*>(pool_->slot(0)) + kHeader;
  if (step.kind == Kind::kTakeBack) {
    std::memcpy(data, theirs, n * elem_);
  } else {
    reduce::reduce(data, data, theirs, n, call_.dtype, call_.op);
  }
  return Status::Ok();
}

Status RecursiveDoubling::progress(const std::string& what, exec::Round* round) {
  if (!ended_) {
    bool ended = false;
    RR_RETURN_IF_ERROR(progress_step(what, round, &ended));
    if (!ended) return Status::Ok();
    Status step_done = finish_step(what);
    batch_.clear();
    RR_RETURN_IF_ERROR(step_done);
    if (++step_ == nsteps_) {
      step_ = 0;
      ++piece_;
      first_ += piece_elems_;
      ended_ = first_ >= call_.count;
    }
    if (!ended_) return start_step(what);
  }
  // avg divides once, by every rank alike
  reduce::finish(call_.recv, call_.recv, call_.count, call_.dtype, call_.op, size_);
  round->done = true;
  return Status::Ok();
}

std::string RecursiveDoubling::step_note() const {
  const size_t pieces = (call_.count + piece_elems_ - 1) / piece_elems_;
  return "piece " + std::to_string(piece_ + 1) + " of " + std::to_string(pieces) + ", step " +
         std::to_string(step_ + 1) + " of " + std::to_string(nsteps_);
}

}  // namespace rr::coll
