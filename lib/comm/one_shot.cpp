// The one-shot schedules on the same-host board (transport/shm/board.hpp,
// exec/board_executor.hpp): each rank publishes its call's header and its
// buffer once, and every rank reads every other's where it lies. An
// allreduce is then one hand-over whatever the rank count, where recursive
// doubling needs log2(N) round trips through UCX; each rank reduces the N
// buffers in rank order, so every rank gets the same bits.
//
// The argument check rides in the publications: a peer's header that
// differs is named as recursive doubling's frames name it. Collectives that
// take another path announce their header on the board (announce(), from
// agree() and recursive doubling), so a rank waiting there for a peer that
// called something else reads what it called instead of waiting out the
// timeout; that rank fails, and its notice ends the peer's wait.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "comm/communicator.hpp"
#include "reduce/reduce.hpp"

namespace rr {

using transport::shm::Board;

Status Communicator::announce(const wire::OpHeader& header) {
  if (!board_exec_) return Status::Ok();
  exec::BoardCall call{wire::collective_name(header.collective), header.sequence, "argument check",
                       std::chrono::milliseconds(settings_.timeout_ms), this};
  uint8_t* buffer = nullptr;
  Status claimed = board_exec_->claim(call, &buffer);
  if (!claimed.ok()) return fail_operation(Status(claimed.code(), header.describe() + ": " + claimed.message()));
  wire::encode_header(header, buffer);
  board_exec_->publish(Board::kNoData);
  board_exec_->finish(false);  // read by the peers only if they wait in a one-shot call
  return Status::Ok();
}

Status Communicator::check_publication(const exec::BoardCall& call, const wire::OpHeader& mine,
                                       const uint8_t* mine_encoded, int peer, const uint8_t* buffer, uint32_t bytes,
                                       uint32_t expected) {
  // The same bytes as this rank's header: the same call (the usual case, no decoding).
  if (bytes == expected && (!settings_.check_arguments || std::memcmp(buffer, mine_encoded, wire::kOpHeaderBytes) == 0)) {
    return Status::Ok();
  }
  const std::string name = call.name();
  wire::OpHeader theirs;
  Status parsed = wire::decode_header(buffer, wire::kOpHeaderBytes, &theirs);
  if (!parsed.ok()) return fail_operation(RemoteError(name + ": rank " + std::to_string(peer) + " published " + parsed.message()));
  if (settings_.check_arguments && theirs != mine) return disagreement(mine, theirs, peer);
  if (bytes == Board::kNoData) {
    return fail_operation(InvalidUsage(name + ": rank " + std::to_string(peer) +
                                       " took another schedule for this call (do the ranks set RR_ALGO, RR_MODEL_* "
                                       "or RR_SHM_BOARD_BYTES differently?)"));
  }
  return fail_operation(InvalidUsage(name + ": rank " + std::to_string(peer) + " published " + std::to_string(bytes) +
                                     " bytes, rank " + std::to_string(rank_) + " expected " + std::to_string(expected) +
                                     " (do the ranks pass the same count?)"));
}

Status Communicator::allreduce_one_shot(const void* send, void* recv, size_t count, rrDataType_t dtype,
                                        rrRedOp_t op, const wire::OpHeader& header) {
  const size_t elem = reduce::dtype_size(dtype);
  const uint64_t sequence = sequence_++;
  exec::BoardCall call{wire::collective_name(header.collective), sequence, "one-shot",
                       std::chrono::milliseconds(settings_.timeout_ms), this};
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
    board_exec_->finish(true);
    first += n;
  } while (first < count);
  reduce::finish(recv, recv, count, dtype, op, size_);  // avg divides once, by every rank alike
  return Status::Ok();
}

}  // namespace rr
