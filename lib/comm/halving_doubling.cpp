// Allreduce by recursive halving and doubling (algo/halving_doubling.hpp):
// the middle sizes, where the ring's 2(N - 1) steps cost more than its bytes
// and recursive doubling's whole-buffer messages more than their count. The
// argument check has already run (agree). The partner's half arrives in
// staging-slot pieces and is reduced from the slot; the all-gather receives
// straight into the output.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "algo/halving_doubling.hpp"
#include "algo/ring.hpp"
#include "comm/communicator.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr {

Status Communicator::allreduce_halving_doubling(exec::Call& call) {
  const void* send = call.send;
  void* recv = call.recv;
  const size_t count = call.count;
  const rrDataType_t dtype = call.dtype;
  const rrRedOp_t op = call.op;
  const size_t elem = reduce::dtype_size(dtype);
  const algo::HalvingDoubling plan(size_, rank_);
  const uint64_t sequence = call.sequence;
  call.schedule = algo::Schedule::kHalvingDoubling;
  const std::string& name = label(call);
  const exec::Clock::time_point until = call.until();
  uint8_t* data = static_cast<uint8_t*>(recv);
  uint8_t* scratch = static_cast<uint8_t*>(pool_.slot(0));
  const size_t piece_elems = std::max<size_t>(1, pool_.slot_bytes() / elem);
  if (send != recv) std::memcpy(recv, send, count * elem);
  // Elements [first, last) of a range of blocks.
  const size_t p = static_cast<size_t>(plan.blocks());
  auto elements = [&](algo::HalvingDoubling::Blocks b) {
    const algo::Range from = algo::split(count, p, static_cast<size_t>(b.first));
    const algo::Range to = algo::split(count, p, static_cast<size_t>(b.last - 1));
    return algo::Range{from.offset, to.offset + to.count - from.offset};
  };
  // Sends `out` to `partner` while receiving its `in` piece by piece into
  // the slot, adding each piece into `data` (reduce) or, for a plain
  // receive, straight into `data` in one message (!reduce).
  auto swap = [&](int partner, int step, algo::Range out, algo::Range in, bool reduce) -> Status {
    if (!reduce) {
      batch_->add_recv(partner, exec::collective_tag(sequence, step, 0), data + in.offset * elem, in.count * elem);
      batch_->add_send(partner, exec::collective_tag(sequence, step, 0), data + out.offset * elem, out.count * elem);
      return run_batch(*batch_, name, until);
    }
    const size_t pieces = std::max((out.count + piece_elems - 1) / piece_elems, (in.count + piece_elems - 1) / piece_elems);
    for (size_t piece = 0; piece < pieces; ++piece) {
      const size_t first = piece * piece_elems;
      const size_t n_in = first < in.count ? std::min(piece_elems, in.count - first) : 0;
      const size_t n_out = first < out.count ? std::min(piece_elems, out.count - first) : 0;
      const uint64_t tag = exec::collective_tag(sequence, step, piece);
      batch_->add_recv(partner, tag, scratch, n_in * elem);
      batch_->add_send(partner, tag, data + (out.offset + first) * elem, n_out * elem);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
      uint8_t* into = data + (in.offset + first) * elem;
      if (n_in > 0) reduce::reduce(into, into, scratch, n_in, dtype, op);
    }
    return Status::Ok();
  };
  const algo::Range all{0, count};
  if (plan.sits_out_for() >= 0) {
    // Hand the input over in the slot-sized pieces its partner adds up one
    // by one, then take the result back in one message.
    const int partner = plan.sits_out_for();
    for (size_t first = 0, piece = 0; first < count; first += piece_elems, ++piece) {
      const size_t n = std::min(piece_elems, count - first);
      batch_->add_send(partner, exec::collective_tag(sequence, 0, piece), data + first * elem, n * elem);
    }
    RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
    batch_->add_recv(partner, exec::collective_tag(sequence, 1, 0), data, count * elem);
    RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
  } else {
    if (plan.folds_in() >= 0) RR_RETURN_IF_ERROR(swap(plan.folds_in(), 0, algo::Range{0, 0}, all, true));
    const int rounds = plan.rounds();
    for (int k = 0; k < rounds; ++k) {
      RR_RETURN_IF_ERROR(swap(plan.scatter_partner(k), 2 + k, elements(plan.scatter_send(k)),
                              elements(plan.scatter_keep(k)), true));
    }
    for (int k = 0; k < rounds; ++k) {
      RR_RETURN_IF_ERROR(swap(plan.gather_partner(k), 2 + rounds + k, elements(plan.gather_send(k)),
                              elements(plan.gather_recv(k)), false));
    }
    if (plan.folds_in() >= 0) {
      batch_->add_send(plan.folds_in(), exec::collective_tag(sequence, 1, 0), data, count * elem);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name, until));
    }
  }
  reduce::finish(recv, recv, count, dtype, op, size_);  // avg divides once, by every rank alike
  return Status::Ok();
}

}  // namespace rr
