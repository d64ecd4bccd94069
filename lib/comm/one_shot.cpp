// The one-shot schedules on the same-host board (transport/shm/board.hpp,
// exec/board_executor.hpp): each rank publishes its call's header and its
// buffer once, and every rank reads every other's where it lies. An
// allreduce is then one hand-over whatever the rank count, where recursive
// doubling needs log2(N) round trips through UCX; each rank reduces the N
// buffers in rank order, so every rank gets the same bits.
//
// The argument check rides in the publications: a peer's header that
// differs is named as recursive doubling's frames name it. Every other
// collective checks its arguments on the board too (agree_on_board(): its
// header, published without data, read by both ring neighbours, one
// hand-over instead of a round trip through UCX), and recursive doubling
// announces its header there before its frames go: so a rank waiting on the
// board for a peer that called something else reads what it called instead
// of waiting out the timeout; that rank fails, and its notice ends the
// peer's wait. What a header-only publication announces is its length: a
// check, or frames sent through UCX.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/communicator.hpp"
#include "reduce/reduce.hpp"

namespace rr {

using transport::shm::Board;

namespace {
// Header-only publications: the argument check of a collective that moves
// its data elsewhere, and recursive doubling's announcement of its frames.
constexpr uint32_t kCheckOnly = Board::kNoData;
constexpr uint32_t kFramesThroughUcx = Board::kNoData - 1;

// `call`'s argument check on the board: named so, with a deadline of its
// own from its first wait, as agree()'s exchange through the transport has.
exec::Call argument_check(const exec::Call& call) {
  exec::Call check = call;
  check.schedule = algo::Schedule::kArgumentCheck;
  check.deadline = {};
  return check;
}
}  // namespace

Status Communicator::announce(const exec::Call& call, const wire::OpHeader& header) {
  if (!board_exec_) return Status::Ok();
  exec::Call check = argument_check(call);
  uint8_t* buffer = nullptr;
  Status claimed = board_exec_->claim(check, &buffer);
  if (!claimed.ok()) return fail_operation(Status(claimed.code(), header.describe() + ": " + claimed.message()));
  wire::encode_header(header, buffer);
  board_exec_->publish(kFramesThroughUcx);
  board_exec_->finish(exec::BoardExecutor::Readers::kNobody, false);  // unless a peer waits there, in error
  return Status::Ok();
}

Status Communicator::agree_on_board(const exec::Call& call, const wire::OpHeader& mine) {
  exec::Call check = argument_check(call);
  uint8_t* buffer = nullptr;
  Status claimed = board_exec_->claim(check, &buffer);
  if (!claimed.ok()) return fail_operation(Status(claimed.code(), mine.describe() + ": " + claimed.message()));
  wire::encode_header(mine, buffer);
  board_exec_->publish(kCheckOnly);
  // RR_CHECK_ARGUMENTS=0: published all the same, so that every rank makes
  // the same publications, but nobody reads it.
  if (!settings_.check_arguments) {
    board_exec_->finish(exec::BoardExecutor::Readers::kNobody, false);
    return Status::Ok();
  }
  // Both ring neighbours by rank number, as agree() exchanged with: if each
  // rank's neighbours called what it called, every rank did.
  const int left = (rank_ + size_ - 1) % size_;
  const int right = (rank_ + 1) % size_;
  const int peers = left == right ? 1 : 2;
  for (int i = 0; i < peers; ++i) {
    const int peer = i == 0 ? left : right;
    board_exec_->count_sent(peer, wire::kOpHeaderBytes);  // the neighbour reads it, as it would have received it
    const uint8_t* theirs = nullptr;
    uint32_t bytes = 0;
    Status awaited = board_exec_->await(check, peer, &theirs, &bytes);
    if (!awaited.ok()) return fail_operation(Status(awaited.code(), mine.describe() + ": " + awaited.message()));
    RR_RETURN_IF_ERROR(check_publication(check, mine, buffer, peer, theirs, bytes, kCheckOnly));
  }
  // Left and right were every peer on 2 or 3 ranks.
  board_exec_->finish(exec::BoardExecutor::Readers::kNeighbours, size_ <= 3);
  return Status::Ok();
}

Status Communicator::check_publication(const exec::Call& call, const wire::OpHeader& mine,
                                       const uint8_t* mine_encoded, int peer, const uint8_t* buffer, uint32_t bytes,
                                       uint32_t expected) {
  // The same bytes as this rank's header: the same call (the usual case, no decoding).
  if (bytes == expected && (!settings_.check_arguments || std::memcmp(buffer, mine_encoded, wire::kOpHeaderBytes) == 0)) {
    return Status::Ok();
  }
  const std::string name = call.label();
  wire::OpHeader theirs;
  Status parsed = wire::decode_header(buffer, wire::kOpHeaderBytes, &theirs);
  if (!parsed.ok()) return fail_operation(RemoteError(name + ": rank " + std::to_string(peer) + " published " + parsed.message()));
  if (settings_.check_arguments && theirs != mine) return disagreement(mine, theirs, peer);
  if (bytes != expected && (!Board::carries_data(bytes) || !Board::carries_data(expected))) {
    const char* theirs_took = bytes == kCheckOnly          ? "the ring, a tree or a direct schedule"
                              : bytes == kFramesThroughUcx ? "recursive doubling"
                                                           : "the one-shot board";
    return fail_operation(InvalidUsage(name + ": rank " + std::to_string(peer) + " took " + theirs_took +
                                       " for this call (do the ranks set RR_ALGO, RR_MODEL_*, RR_CHUNK_BYTES or "
                                       "RR_SHM_BOARD_BYTES differently?)"));
  }
  return fail_operation(InvalidUsage(name + ": rank " + std::to_string(peer) + " published " + std::to_string(bytes) +
                                     " bytes, rank " + std::to_string(rank_) + " expected " + std::to_string(expected) +
                                     " (do the ranks pass the same count?)"));
}

Status Communicator::allreduce_one_shot(exec::Call& call, const wire::OpHeader& header) {
  const void* send = call.send;
  void* recv = call.recv;
  const size_t count = call.count;
  const rrDataType_t dtype = call.dtype;
  const rrRedOp_t op = call.op;
  const size_t elem = reduce::dtype_size(dtype);
  call.schedule = algo::Schedule::kOneShot;
  // A call larger than a publication (RR_ALGO=oneshot forces any size)
  // goes in publications of the board's capacity, one after another.
  const size_t piece_elems = std::max<size_t>(1, board_exec_->capacity() / elem);
  size_t first = 0;
  do {
    const size_t n = std::min(piece_elems, count - first);
    const auto bytes = static_cast<uint32_t>(n * elem);
    uint8_t* mine = nullptr;
    RR_RETURN_IF_ERROR(fail_operation(board_exec_->claim(call, &mine)));
    wire::encode_header(header, mine);
    static_assert(wire::kOpHeaderBytes <= Board::kHeaderRoom, "the header fits the board's room");
    const uint8_t* own = mine + Board::kHeaderRoom;
    std::memcpy(mine + Board::kHeaderRoom, static_cast<const uint8_t*>(send) + first * elem, bytes);
    board_exec_->publish(bytes);
    board_exec_->count_sent_to_all(wire::kOpHeaderBytes + bytes);  // every peer reads it
    // Every rank's part, in rank order: the same sums on every rank. The
    // output is written only from the board (in place, send is recv).
    auto* out = static_cast<uint8_t*>(recv) + first * elem;
    const uint8_t* previous = nullptr;  // the first part, until the second is reduced with it
    for (int r = 0; r < size_; ++r) {
      const uint8_t* part = own;
      if (r != rank_) {
        const uint8_t* buffer = nullptr;
        uint32_t published = 0;
        RR_RETURN_IF_ERROR(fail_operation(board_exec_->await(call, r, &buffer, &published)));
        RR_RETURN_IF_ERROR(check_publication(call, header, mine, r, buffer, published, bytes));
        part = buffer + Board::kHeaderRoom;
      }
      if (r == 0) {
        previous = part;
      } else {
        reduce::reduce(out, r == 1 ? previous : out, part, n, dtype, op);
      }
    }
    board_exec_->finish(exec::BoardExecutor::Readers::kEveryone, true);
    first += n;
  } while (first < count);
  reduce::finish(recv, recv, count, dtype, op, size_);  // avg divides once, by every rank alike
  return Status::Ok();
}

}  // namespace rr
