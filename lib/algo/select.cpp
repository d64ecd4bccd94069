#include "algo/select.hpp"

namespace rr::algo {

const char* algo_name(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::kRing: return "ring";
    case AllreduceAlgo::kRecursiveDoubling: return "rd";
    case AllreduceAlgo::kAuto: break;
  }
  return "auto";
}

bool parse_algo(const std::string& text, AllreduceAlgo* out) {
  for (AllreduceAlgo a : {AllreduceAlgo::kAuto, AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling}) {
    if (text == algo_name(a)) {
      *out = a;
      return true;
    }
  }
  return false;
}

double ring_seconds(const CostModel& m, int nranks, size_t bytes) {
  const double n = static_cast<double>(bytes);
  const double steps = 2.0 * (nranks - 1);
  return steps * m.alpha_s + steps / nranks * n * m.beta_s_per_byte + (nranks - 1.0) / nranks * n * m.gamma_s_per_byte;
}

double recursive_doubling_seconds(const CostModel& m, int nranks, size_t bytes) {
  int pow2 = 1, log2 = 0;
  while (pow2 * 2 <= nranks) pow2 *= 2, ++log2;
  const double fold = pow2 == nranks ? 0.0 : 2.0;
  const double n = static_cast<double>(bytes);
  return (log2 + fold) * (m.alpha_s + n * m.beta_s_per_byte) + (log2 + fold / 2) * n * m.gamma_s_per_byte;
}

AllreduceAlgo choose_allreduce(AllreduceAlgo forced, const CostModel& m, int nranks, size_t bytes) {
  if (forced != AllreduceAlgo::kAuto) return forced;
  if (nranks < 2) return AllreduceAlgo::kRing;
  return recursive_doubling_seconds(m, nranks, bytes) < ring_seconds(m, nranks, bytes)
             ? AllreduceAlgo::kRecursiveDoubling
             : AllreduceAlgo::kRing;
}

}  // namespace rr::algo
