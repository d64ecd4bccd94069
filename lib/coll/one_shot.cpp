#include "coll/one_shot.hpp"

#include <algorithm>
#include <cstring>

#include "reduce/reduce.hpp"

namespace rr::coll {

using transport::shm::Board;

namespace {
// Header-only publications: the argument check of a collective that moves
// its data elsewhere, and recursive doubling's announcement of its frames.
constexpr uint32_t kCheckOnly = Board::kNoData;
constexpr uint32_t kFramesThroughUcx = Board::kNoData - 1;
static_assert(wire::kOpHeaderBytes <= Board::kHeaderRoom, "the header fits the board's room");
}  // namespace

OneShot::OneShot(exec::BoardExecutor* board, int size, bool check_arguments)
    : board_(board), rank_(board->rank()), size_(size), check_arguments_(check_arguments) {}

void OneShot::prepare(Kind kind, const exec::Call& call, const wire::OpHeader& header) {
  kind_ = kind;
  call_ = call;
  header_ = header;
  if (kind == Kind::kAllreduce) {
    call_.schedule = algo::Schedule::kOneShot;
    elem_ = reduce::dtype_size(call.dtype);
    piece_elems_ = std::max<size_t>(1, board_->capacity() / elem_);
    readers_ = static_cast<size_t>(size_);
    return;
  }
  // The check is named so, with a deadline of its own from its first wait,
  // as agree()'s exchange through the transport has.
  call_.schedule = algo::Schedule::kArgumentCheck;
  call_.deadline = {};
  elem_ = 0;
  piece_elems_ = 0;
  // RR_CHECK_ARGUMENTS=0: published all the same, so that every rank makes
  // the same publications, but nobody reads it. Both ring neighbours by rank
  // number, as agree() exchanged with: if each rank's neighbours called what
  // it called, every rank did.
  readers_ = kind == Kind::kCheck && check_arguments_ ? (size_ == 2 ? 1 : 2) : 0;
}

int OneShot::reader(size_t i) const {
  if (kind_ == Kind::kAllreduce) return static_cast<int>(i);
  return i == 0 ? (rank_ + size_ - 1) % size_ : (rank_ + 1) % size_;
}

Status OneShot::post(const std::string&) {
  first_ = 0;
  published_ = false;
  ended_ = false;
  waiting_ = -1;
  polled_ = false;
  still_rounds_.moved();
  return Status::Ok();
}

void OneShot::publish_piece() {
  uint8_t* mine = board_->buffer();
  wire::encode_header(header_, mine);
  mine_ = mine;
  if (kind_ != Kind::kAllreduce) {
    expected_ = kind_ == Kind::kCheck ? kCheckOnly : kFramesThroughUcx;
    board_->publish(expected_);
    // A neighbour reads it, as it would have received it.
    for (size_t i = 0; i < readers_; ++i) board_->count_sent(reader(i), wire::kOpHeaderBytes);
  } else {
    piece_ = std::min(piece_elems_, call_.count - first_);
    expected_ = static_cast<uint32_t>(piece_ * elem_);
    if (piece_ > 0) {
      std::memcpy(mine + Board::kHeaderRoom, static_cast<const uint8_t*>(call_.send) + first_ * elem_, expected_);
    }
    board_->publish(expected_);
    board_->count_sent_to_all(wire::kOpHeaderBytes + expected_);  // every peer reads it
  }
  published_ = true;
  polled_ = false;
  next_reader_ = 0;
}

Status OneShot::take(int peer, const uint8_t* buffer, uint32_t bytes) {
  if (peer != rank_) RR_RETURN_IF_ERROR(check_publication(peer, buffer, bytes));
  if (kind_ != Kind::kAllreduce || piece_ == 0) return Status::Ok();
  // Every rank's part, in rank order: the same sums on every rank. The
  // output is written only from the board (in place, send is recv).
  const uint8_t* part = (peer == rank_ ? mine_ : buffer) + Board::kHeaderRoom;
  auto* out = static_cast<uint8_t*>(call_.recv) + first_ * elem_;
  if (size_ == 1) {
    std::memcpy(out, part, piece_ * elem_);
  } else if (peer == 0) {
    previous_ = part;
  } else {
    reduce::reduce(out, peer == 1 ? previous_ : out, part, piece_, call_.dtype, call_.op);
  }
  return Status::Ok();
}

Status OneShot::progress(const std::string&, exec::Round* round) {
  // Still waiting (the common round of a wait): one look at the flag, in a
  // function small enough to cost little more (a rank spins a number of
  // rounds before it yields its core to the peer it waits for).
  if (polled_ && !board_->there(waiting_, claiming_)) return still(round);
  return advance(round);
}

Status OneShot::advance(exec::Round* round) {
  while (!ended_) {
    if (!published_) {
      const int blocker = board_->claim_blocker();
      if (blocker >= 0) {
        if (!first_look(blocker, true, round)) return still(round);
        continue;  // that peer is done: the next may not be
      }
      publish_piece();
      round->moved = true;
    }
    for (; next_reader_ < readers_; ++next_reader_) {
      const int peer = reader(next_reader_);
      const uint8_t* buffer = nullptr;
      uint32_t bytes = 0;
      if (peer != rank_ && !board_->read(peer, &buffer, &bytes)) {
        if (!first_look(peer, false, round)) return still(round);
        board_->read(peer, &buffer, &bytes);
      }
      polled_ = false;
      round->moved = true;  // a wait for the next part starts afresh (spins before it yields)
      RR_RETURN_IF_ERROR(take(peer, buffer, bytes));
    }
    // Who reads this publication, and whether this rank read every peer's
    // (left and right were every peer on 2 or 3 ranks).
    using Readers = exec::BoardExecutor::Readers;
    if (kind_ == Kind::kAllreduce) {
      board_->finish(Readers::kEveryone, true);
      first_ += piece_;
      ended_ = first_ >= call_.count;
    } else {
      // An announcement is read only by a peer that waits there in error.
      board_->finish(readers_ > 0 ? Readers::kNeighbours : Readers::kNobody, readers_ > 0 && size_ <= 3);
      ended_ = true;
    }
    published_ = false;
  }
  // avg divides once, by every rank alike.
  if (kind_ == Kind::kAllreduce && call_.count > 0) {
    reduce::finish(call_.recv, call_.recv, call_.count, call_.dtype, call_.op, size_);
  }
  round->done = true;
  return Status::Ok();
}

bool OneShot::first_look(int peer, bool claiming, exec::Round* round) {
  if (polled_ && peer == waiting_ && claiming == claiming_) return false;  // looked already: wait
  waiting_ = peer;
  claiming_ = claiming;
  polled_ = true;
  still_rounds_.moved();
  if (board_->poll(peer, claiming)) return true;
  round->spun = true;  // the poll was the wait's spin
  return false;
}

void OneShot::needs(int* from, int* to) const {
  *from = ended_ ? -1 : waiting_;
  *to = -1;
}

Status OneShot::stalled(const std::string&, Code code, int, const std::string& cause) const {
  std::string text;
  if (kind_ != Kind::kAllreduce) text = header_.describe() + ": ";
  text += call_.label();
  const std::string rank = std::to_string(rank_);
  if (code == Code::kOk) {  // a dump's line
    return Status(code, text + ": rank " + rank + " waited for rank " + std::to_string(waiting_) +
                            (claiming_ ? "'s previous publication" : "'s part of the call") +
                            " on the same-host shared-memory board in progress");
  }
  text += (code == Code::kTimeout ? " timed out: rank " : " failed: rank ") + rank + board_->wait_note(waiting_, claiming_);
  if (code != Code::kTimeout) text += ": " + cause;
  return Status(code, text);
}

Status OneShot::check_publication(int peer, const uint8_t* buffer, uint32_t bytes) const {
  // The same bytes as this rank's header: the same call (the usual case, no decoding).
  if (bytes == expected_ && (!check_arguments_ || std::memcmp(buffer, mine_, wire::kOpHeaderBytes) == 0)) {
    return Status::Ok();
  }
  const std::string name = call_.label();
  wire::OpHeader theirs;
  Status parsed = wire::decode_header(buffer, wire::kOpHeaderBytes, &theirs);
  if (!parsed.ok()) return RemoteError(name + ": rank " + std::to_string(peer) + " published " + parsed.message());
  if (check_arguments_ && theirs != header_) return wire::disagreement(header_, theirs, rank_, peer);
  if (bytes != expected_ && (!Board::carries_data(bytes) || !Board::carries_data(expected_))) {
    const char* theirs_took = bytes == kCheckOnly          ? "the ring, a tree or a direct schedule"
                              : bytes == kFramesThroughUcx ? "recursive doubling"
                                                           : "the one-shot board";
    return InvalidUsage(name + ": rank " + std::to_string(peer) + " took " + theirs_took +
                        " for this call (do the ranks set RR_ALGO, RR_MODEL_*, RR_CHUNK_BYTES or "
                        "RR_SHM_BOARD_BYTES differently, or pass different algorithms in the call's "
                        "rrCollConfig_t?)");
  }
  return InvalidUsage(name + ": rank " + std::to_string(peer) + " published " + std::to_string(bytes) +
                      " bytes, rank " + std::to_string(rank_) + " expected " + std::to_string(expected_) +
                      " (do the ranks pass the same count?)");
}

}  // namespace rr::coll
