#include "coll/halving_doubling.hpp"

#include <algorithm>
#include <cstring>

#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr::coll {

HalvingDoubling::HalvingDoubling(transport::Transport* transport, memory::StagingPool* pool, int rank, int size)
    : BatchSteps(transport), pool_(pool), size_(size), plan_(size, rank) {
  auto add = [&](Kind kind, int peer, int tag_step, int round = 0) {
    steps_[nsteps_++] = Step{kind, peer, tag_step, round};
  };
  if (plan_.sits_out_for() >= 0) {
    // Hand the input over in the slot-sized pieces its partner adds up one
    // by one, then take the result back in one message.
    add(Kind::kHandOver, plan_.sits_out_for(), 0);
    add(Kind::kTakeBack, plan_.sits_out_for(), 1);
    return;
  }
  if (plan_.folds_in() >= 0) add(Kind::kFoldIn, plan_.folds_in(), 0);
  const int rounds = plan_.rounds();
  for (int k = 0; k < rounds; ++k) add(Kind::kScatter, plan_.scatter_partner(k), 2 + k, k);
  for (int k = 0; k < rounds; ++k) add(Kind::kGather, plan_.gather_partner(k), 2 + rounds + k, k);
  if (plan_.folds_in() >= 0) add(Kind::kFoldOut, plan_.folds_in(), 1);
}

void HalvingDoubling::prepare(const exec::Call& call) {
  call_ = call;
  elem_ = reduce::dtype_size(call.dtype);
  piece_elems_ = std::max<size_t>(1, pool_->slot_bytes() / elem_);
  // The hand-over's pieces are one batch.
  batch_.reserve(std::max<size_t>(2, (call.count + piece_elems_ - 1) / piece_elems_));
}

algo::Range HalvingDoubling::elements(algo::HalvingDoubling::Blocks b) const {
  const size_t p = static_cast<size_t>(plan_.blocks());
  const algo::Range from = algo::split(call_.count, p, static_cast<size_t>(b.first));
  const algo::Range to = algo::split(call_.count, p, static_cast<size_t>(b.last - 1));
  return algo::Range{from.offset, to.offset + to.count - from.offset};
}

algo::Range HalvingDoubling::sent(const Step& step) const {
  switch (step.kind) {
    case Kind::kScatter:
      return elements(plan_.scatter_send(step.round));
    case Kind::kGather:
      return elements(plan_.gather_send(step.round));
    case Kind::kHandOver:
    case Kind::kFoldOut:
      return algo::Range{0, call_.count};
    default:
      return algo::Range{0, 0};
  }
}

algo::Range HalvingDoubling::received(const Step& step) const {
  switch (step.kind) {
    case Kind::kScatter:
      return elements(plan_.scatter_keep(step.round));
    case Kind::kGather:
      return elements(plan_.gather_recv(step.round));
    case Kind::kTakeBack:
    case Kind::kFoldIn:
      return algo::Range{0, call_.count};
    default:
      return algo::Range{0, 0};
  }
}

size_t HalvingDoubling::pieces(const Step& step) const {
  if (!reducing(step)) return 1;
  auto in_pieces = [&](size_t n) { return (n + piece_elems_ - 1) / piece_elems_; };
  return std::max(in_pieces(sent(step).count), in_pieces(received(step).count));
}

Status HalvingDoubling::start_piece(const std::string& what) {
  const Step& step = steps_[step_];
  uint8_t* data = static_cast<uint8_t*>(call_.recv);
  const algo::Range out = sent(step), in = received(step);
  if (step.kind == Kind::kHandOver) {
    for (size_t first = 0, piece = 0; first < call_.count; first += piece_elems_, ++piece) {
      const size_t n = std::min(piece_elems_, call_.count - first);
      batch_.add_send(step.peer, exec::collective_tag(call_.sequence, step.tag_step, piece), data + first * elem_,
                      n * elem_);
    }
  } else if (!reducing(step)) {
    const uint64_t tag = exec::collective_tag(call_.sequence, step.tag_step, 0);
    batch_.add_recv(step.peer, tag, data + in.offset * elem_, in.count * elem_);
    batch_.add_send(step.peer, tag, data + out.offset * elem_, out.count * elem_);
  } else {
    // The partner's piece into the slot, this rank's piece out of the output.
    const size_t first = piece_ * piece_elems_;
    const size_t n_in = first < in.count ? std::min(piece_elems_, in.count - first) : 0;
    const size_t n_out = first < out.count ? std::min(piece_elems_, out.count - first) : 0;
    const uint64_t tag = exec::collective_tag(call_.sequence, step.tag_step, piece_);
    batch_.add_recv(step.peer, tag, pool_->slot(0), n_in * elem_);
    batch_.add_send(step.peer, tag, data + (out.offset + first) * elem_, n_out * elem_);
  }
  return batch_.post(what);
}

bool HalvingDoubling::advance() {
  if (++piece_ < pieces(steps_[step_])) return true;
  piece_ = 0;
  while (++step_ < nsteps_) {
    if (pieces(steps_[step_]) > 0) return true;  // a reducing swap of nothing has no pieces
  }
  return false;
}

Status HalvingDoubling::post(const std::string& what) {
  batch_.clear();  // a failed call leaves its transfers
  if (call_.send != call_.recv && call_.count > 0) std::memcpy(call_.recv, call_.send, call_.count * elem_);
  step_ = 0;
  piece_ = 0;
  // One rank, or nothing to reduce: no step.
  ended_ = nsteps_ == 0 || call_.count == 0 || (pieces(steps_[0]) == 0 && !advance());
  return ended_ ? Status::Ok() : start_piece(what);
}

Status HalvingDoubling::progress(const std::string& what, exec::Round* round) {
  if (!ended_) {
    bool ended = false;
    RR_RETURN_IF_ERROR(progress_step(what, round, &ended));
    if (!ended) return Status::Ok();
    batch_.clear();
    finish_piece();
    ended_ = !advance();
    if (!ended_) return start_piece(what);
  }
  // avg divides once, by every rank alike
  reduce::finish(call_.recv, call_.recv, call_.count, call_.dtype, call_.op, size_);
  round->done = true;
  return Status::Ok();
}

void HalvingDoubling::finish_piece() {
  const Step& step = steps_[step_];
  if (reducing(step)) {
    const algo::Range in = received(step);
    const size_t first = piece_ * piece_elems_;
    const size_t n_in = first < in.count ? std::min(piece_elems_, in.count - first) : 0;
    uint8_t* into = static_cast<uint8_t*>(call_.recv) + (in.offset + first) * elem_;
    if (n_in > 0) reduce::reduce(into, into, pool_->slot(0), n_in, call_.dtype, call_.op);
  }
}

std::string HalvingDoubling::step_note() const {
  return "step " + std::to_string(step_ + 1) + " of " + std::to_string(nsteps_) + ", piece " +
         std::to_string(piece_ + 1) + " of " + std::to_string(pieces(steps_[step_]));
}

}  // namespace rr::coll
