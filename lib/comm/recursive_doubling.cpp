// Allreduce by recursive doubling (algo/recursive_doubling.hpp): the
// latency path, for messages the model (algo/select.hpp) finds faster there
// than on the ring. One staging slot holds the partner's buffer each round.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "algo/recursive_doubling.hpp"
#include "comm/communicator.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr {

Status Communicator::allreduce_recursive_doubling(exec::Call& call, const wire::OpHeader& header) {
  const void* send = call.send;
  void* recv = call.recv;
  const size_t count = call.count;
  const rrDataType_t dtype = call.dtype;
  const rrRedOp_t op = call.op;
  // A peer waiting on the same-host board sees that this rank sends frames
  // through UCX (whatever RR_CHECK_ARGUMENTS says, as agree() publishes its
  // check: every rank makes the same publications).
  RR_RETURN_IF_ERROR(announce(call, header));
  const size_t elem = reduce::dtype_size(dtype);
  const algo::RecursiveDoubling plan(size_, rank_);
  const uint64_t sequence = call.sequence;
  call.schedule = algo::Schedule::kRecursiveDoubling;
  const std::string& name = label(call);
  const exec::Clock::time_point until = call.until();  // one clock read per call
  // Each message is a frame: this call's operation header, then the data.
  // Frames go out of slot 1 (its header written once) and come into slot 0,
  // which takes any frame up to a slot: a peer that called something else
  // is then named by its header, whatever the length of what it sent.
  constexpr size_t kHeader = wire::kOpHeaderBytes;
  uint8_t* in = static_cast<uint8_t*>(pool_.slot(0));
  uint8_t* out = static_cast<uint8_t*>(pool_.slot(1));
  const size_t frame_room = pool_.slot_bytes();
  wire::encode_header(header, out);
  if (send != recv) std::memcpy(recv, send, count * elem);
  // The first message of the call travels on the operation header's tag, as
  // the other collectives' headers do: a peer that called one of those gets
  // this frame where it expects a header, and fails at once instead of waiting.
  auto tag = [sequence](int step, size_t piece) {
    return exec::collective_tag(sequence, piece == 0 && (step == 0 || step == 2) ? exec::kHeaderStep : step, piece);
  };
  // The frame of `got` bytes in `in` came from `peer`, which should have sent `bytes` of data.
  auto check_frame = [&](int peer, size_t got, size_t bytes) -> Status {
    wire::OpHeader theirs;
    Status parsed = got < kHeader ? RemoteError("a message of " + std::to_string(got) + " bytes")
                                  : wire::decode_header(in, kHeader, &theirs);
    if (!parsed.ok()) {
      return fail_operation(RemoteError(name + ": rank " + std::to_string(peer) + " sent " + parsed.message()));
    }
    if (settings_.check_arguments && theirs != header) return disagreement(header, theirs, peer);
    if (got != kHeader + bytes) {
      return fail_operation(InvalidUsage(
          name + ": rank " + std::to_string(peer) + " sent " + std::to_string(got - kHeader) + " bytes, rank " +
          std::to_string(rank_) + " expected " + std::to_string(bytes) +
          (got == kHeader ? " (it checked the call's arguments the ring's way: do the ranks set RR_ALGO, "
                            "RR_MODEL_* or RR_CHUNK_BYTES differently?)"
                          : " (do the ranks pass the same count, or set RR_CHUNK_BYTES differently?)")));
    }
    return Status::Ok();
  };
  // A frame's data must fit a slot after the header: a message longer than
  // that (RR_ALGO=rd forces any size) goes in slot-sized pieces, one after
  // another; the piece is the tag's column.
  const size_t piece_elems = std::max<size_t>(1, (frame_room - kHeader) / elem);
  for (size_t first = 0, piece = 0; first < count; first += piece_elems, ++piece) {
    const size_t n = std::min(piece_elems, count - first);
    const size_t bytes = n * elem;
    uint8_t* data = static_cast<uint8_t*>(recv) + first * elem;
    auto send_frame = [&](int peer, int step) {
      std::memcpy(out + kHeader, data, bytes);
      batch_->add_send(peer, tag(step, piece), out, kHeader + bytes);
    };
    size_t got = 0;
    if (plan.sits_out_for() >= 0) {
      // Hand the input over, then take the result back.
      const int partner = plan.sits_out_for();
      send_frame(partner, 0);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
      batch_->add_recv_up_to(partner, tag(1, piece), in, frame_room);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until, &got));
      RR_RETURN_IF_ERROR(check_frame(partner, got, bytes));
      std::memcpy(data, in + kHeader, bytes);
      continue;
    }
    if (plan.folds_in() >= 0) {
      batch_->add_recv_up_to(plan.folds_in(), tag(0, piece), in, frame_room);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until, &got));
      RR_RETURN_IF_ERROR(check_frame(plan.folds_in(), got, bytes));
      reduce::reduce(data, data, in + kHeader, n, dtype, op);
    }
    for (int round = 0; round < plan.rounds(); ++round) {
      const int partner = plan.partner(round);
      batch_->add_recv_up_to(partner, tag(2 + round, piece), in, frame_room);
      send_frame(partner, 2 + round);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until, &got));
      RR_RETURN_IF_ERROR(check_frame(partner, got, bytes));
      reduce::reduce(data, data, in + kHeader, n, dtype, op);
    }
    if (plan.folds_in() >= 0) {
      send_frame(plan.folds_in(), 1);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
    }
  }
  reduce::finish(recv, recv, count, dtype, op, size_);  // avg divides once, by every rank alike
  return Status::Ok();
}

}  // namespace rr
