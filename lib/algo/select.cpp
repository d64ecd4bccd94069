#include "algo/select.hpp"

namespace rr::algo {

const char* algo_name(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::kRing: return "ring";
    case AllreduceAlgo::kRecursiveDoubling: return "rd";
    case AllreduceAlgo::kHalvingDoubling: return "hd";
    case AllreduceAlgo::kOneShot: return "oneshot";
    case AllreduceAlgo::kAuto: break;
  }
  return "auto";
}

bool parse_algo(const std::string& text, AllreduceAlgo* out) {
  for (AllreduceAlgo a : {AllreduceAlgo::kAuto, AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                          AllreduceAlgo::kHalvingDoubling, AllreduceAlgo::kOneShot}) {
    if (text == algo_name(a)) {
      *out = a;
      return true;
    }
  }
  return false;
}

namespace {

// On one host whose ranks each have a core, every message (a slot hand-over,
// or UCX's shared-memory eager message) is a cache line or two passed
// between cores: slot_alpha. Sharing cores, each costs a context switch: alpha.
CostModel on_this_host(const CostModel& m, const HostShape& shape) {
  CostModel local = m;
  if (shape.slot_rings && shape.hosts <= 1 && !shape.shares_cores) local.alpha_s = m.slot_alpha_s;
  return local;
}

}  // namespace

double ring_seconds(const CostModel& model, int nranks, size_t bytes, const HostShape& shape) {
  const CostModel m = on_this_host(model, shape);
  const double n = static_cast<double>(bytes);
  const double steps = 2.0 * (nranks - 1);
  const double data = steps / nranks * n * m.beta_s_per_byte + (nranks - 1.0) / nranks * n * m.gamma_s_per_byte;
  // Slot rings: the argument check's message, then one per step.
  if (shape.slot_rings && shape.hosts <= 1) return (steps + 1) * m.alpha_s + data;
  const double remote_steps = shape.hosts > 1 ? 2.0 * shape.hosts : 0.0;
  return (steps - remote_steps) * m.alpha_s + remote_steps * m.remote_alpha() + data;
}

double recursive_doubling_seconds(const CostModel& model, int nranks, size_t bytes, const HostShape& shape) {
  const CostModel m = on_this_host(model, shape);
  int pow2 = 1, log2 = 0;
  while (pow2 * 2 <= nranks) pow2 *= 2, ++log2;
  const double fold = pow2 == nranks ? 0.0 : 2.0;
  const double n = static_cast<double>(bytes);
  // Rounds between hosts, whose link all of a host's ranks share.
  int crossing = 0;
  while (crossing < log2 && (1 << crossing) < shape.hosts) ++crossing;
  const double sharing = shape.hosts > 1 && shape.ranks_per_host > 1 ? shape.ranks_per_host : 1.0;
  return (log2 - crossing + fold) * (m.alpha_s + n * m.beta_s_per_byte) +
         crossing * (m.remote_alpha() + sharing * n * m.beta_s_per_byte) + (log2 + fold / 2) * n * m.gamma_s_per_byte;
}

double halving_doubling_seconds(const CostModel& model, int nranks, size_t bytes, const HostShape& shape) {
  const CostModel m = on_this_host(model, shape);
  int pow2 = 1, log2 = 0;
  while (pow2 * 2 <= nranks) pow2 *= 2, ++log2;
  const double fold = pow2 == nranks ? 0.0 : 2.0;
  const double n = static_cast<double>(bytes);
  const double share = (pow2 - 1.0) / pow2;
  // Across hosts, as for recursive doubling, a host's ranks share its link
  // in the rounds that cross it; the bytes are charged as if every round did.
  const double sharing = shape.hosts > 1 && shape.ranks_per_host > 1 ? shape.ranks_per_host : 1.0;
  const double alpha = shape.hosts > 1 ? m.remote_alpha() : m.alpha_s;
  return (2 * log2 + fold + 2) * alpha + (2 * share * sharing + fold) * n * m.beta_s_per_byte +
         (share + fold / 2) * n * m.gamma_s_per_byte;
}

double one_shot_seconds(const CostModel& model, int nranks, size_t bytes, const HostShape& shape) {
  // Priced as on slot rings: a hand-over between cores, or a context switch when ranks share them.
  HostShape local = shape;
  local.slot_rings = true;
  const CostModel m = on_this_host(model, local);
  const double n = static_cast<double>(bytes);
  return m.alpha_s + n * m.beta_s_per_byte + (nranks - 1.0) * n * m.gamma_s_per_byte;
}

AllreduceAlgo choose_allreduce(AllreduceAlgo forced, const CostModel& m, int nranks, size_t bytes,
                               const HostShape& shape) {
  const bool has_board = shape.board_bytes != 0 && shape.hosts <= 1;
  if (forced == AllreduceAlgo::kOneShot && !has_board) forced = AllreduceAlgo::kAuto;
  if (forced != AllreduceAlgo::kAuto) return forced;
  if (nranks < 2) return AllreduceAlgo::kRing;
  if (has_board && bytes <= shape.board_bytes) {
    const double one_shot = one_shot_seconds(m, nranks, bytes, shape);
    if (one_shot <= ring_seconds(m, nranks, bytes, shape) &&
        one_shot <= recursive_doubling_seconds(m, nranks, bytes, shape)) {
      return AllreduceAlgo::kOneShot;
    }
  }
  // Halving-doubling only when forced: this model adds its transfers and
  // reductions, which its runner does one after the other, but also the
  // ring's, which overlaps them across its columns, so the model would pick
  // it at sizes where it has not been measured to win (bench/RESULTS.md,
  // "Shared memory, 2 and 4 ranks", "Halving-doubling beside the ring").
  return recursive_doubling_seconds(m, nranks, bytes, shape) < ring_seconds(m, nranks, bytes, shape)
             ? AllreduceAlgo::kRecursiveDoubling
             : AllreduceAlgo::kRing;
}

}  // namespace rr::algo
