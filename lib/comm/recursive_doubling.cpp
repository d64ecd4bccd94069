// Allreduce by recursive doubling (algo/recursive_doubling.hpp): the
// latency path, for messages the model (algo/select.hpp) finds faster there
// than on the ring. One staging slot holds the partner's buffer each round.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "algo/recursive_doubling.hpp"
#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr {

algo::AllreduceAlgo Communicator::allreduce_algo(size_t bytes, bool has_reducer) {
  algo::AllreduceAlgo chosen = algo::choose_allreduce(settings_.allreduce_algo, settings_.model, size_, bytes);
  // The staged (device) path reduces through its own reducer, chunk by
  // chunk on the ring.
  if (has_reducer) chosen = algo::AllreduceAlgo::kRing;
  if (chosen != last_algo_ || bytes > last_algo_bytes_ * 2 || bytes * 2 < last_algo_bytes_) {
    RR_LOG(LogLevel::kInfo, "rank %d: allreduce of %zu bytes on %d ranks: %s (model: ring %.1f us, rd %.1f us; RR_ALGO=%s)",
           rank_, bytes, size_, chosen == algo::AllreduceAlgo::kRing ? "ring" : "recursive doubling",
           algo::ring_seconds(settings_.model, size_, bytes) * 1e6,
           algo::recursive_doubling_seconds(settings_.model, size_, bytes) * 1e6,
           algo::algo_name(settings_.allreduce_algo));
    last_algo_ = chosen;
    last_algo_bytes_ = bytes;
  }
  return chosen;
}

Status Communicator::allreduce_recursive_doubling(const void* send, void* recv, size_t count, rrDataType_t dtype,
                                                  rrRedOp_t op) {
  const size_t elem = reduce::dtype_size(dtype);
  const algo::RecursiveDoubling plan(size_, rank_);
  const uint64_t sequence = sequence_++;
  // The name errors quote, written into a string kept from call to call:
  // the data path allocates nothing.
  char text[64];
  std::snprintf(text, sizeof(text), "allreduce #%llu (recursive doubling)", static_cast<unsigned long long>(sequence));
  std::string& name = operation_name_;
  name.assign(text);
  void* scratch = pool_.slot(0);
  if (send != recv) std::memcpy(recv, send, count * elem);
  // A message longer than a staging slot (RR_ALGO=rd forces any size) goes
  // through in slot-sized pieces, one after another; the piece is the tag's column.
  const size_t piece_elems = std::max<size_t>(1, pool_.slot_bytes() / elem);
  for (size_t first = 0, piece = 0; first < count; first += piece_elems, ++piece) {
    const size_t n = std::min(piece_elems, count - first);
    const size_t bytes = n * elem;
    uint8_t* data = static_cast<uint8_t*>(recv) + first * elem;
    if (plan.sits_out_for() >= 0) {
      // Hand the input over, then take the result back.
      const int partner = plan.sits_out_for();
      batch_->add_send(partner, exec::collective_tag(sequence, 0, piece), data, bytes);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      batch_->add_recv(partner, exec::collective_tag(sequence, 1, piece), data, bytes);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      continue;
    }
    if (plan.folds_in() >= 0) {
      batch_->add_recv(plan.folds_in(), exec::collective_tag(sequence, 0, piece), scratch, bytes);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      reduce::reduce(data, data, scratch, n, dtype, op);
    }
    for (int round = 0; round < plan.rounds(); ++round) {
      const uint64_t tag = exec::collective_tag(sequence, 2 + round, piece);
      batch_->add_recv(plan.partner(round), tag, scratch, bytes);
      batch_->add_send(plan.partner(round), tag, data, bytes);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      reduce::reduce(data, data, scratch, n, dtype, op);
    }
    if (plan.folds_in() >= 0) {
      batch_->add_send(plan.folds_in(), exec::collective_tag(sequence, 1, piece), data, bytes);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
    }
  }
  reduce::finish(recv, recv, count, dtype, op, size_);  // avg divides once, by every rank alike
  return Status::Ok();
}

}  // namespace rr
