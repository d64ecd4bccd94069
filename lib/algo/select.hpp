#pragma once
// Which allreduce schedule a call takes, from an alpha-beta-gamma model of
// the machine: alpha seconds per message, beta seconds per byte moved,
// gamma seconds per byte reduced. On N ranks, for n bytes:
//   ring                2(N-1) alpha + 2(N-1)/N n beta + (N-1)/N n gamma
//   recursive doubling  (log2 P + f) alpha + (log2 P + f) n beta + (log2 P + f/2) n gamma,
// with P the largest power of two <= N and f = 2 when N != P (the fold and
// the hand-back). The smaller predicted time wins; RR_ALGO forces one.

#include <cstddef>
#include <string>

namespace rr::algo {

enum class AllreduceAlgo { kAuto, kRing, kRecursiveDoubling };

struct CostModel {
  double alpha_s = 2e-6;          // per message: UCX's shared-memory latency plus a wake-up on this machine
  double beta_s_per_byte = 1.5e-10;  // moving a byte: ~6.5 GB/s, single-thread memcpy here
  double gamma_s_per_byte = 2.5e-10;  // reducing a byte: ~4 GB/s for float32 sum
};

// "ring", "rd" (recursive doubling) or "auto".
const char* algo_name(AllreduceAlgo algo);
// Parses RR_ALGO's value; false for anything else.
bool parse_algo(const std::string& text, AllreduceAlgo* out);

// The model's predicted time of each schedule, in seconds.
double ring_seconds(const CostModel& m, int nranks, size_t bytes);
double recursive_doubling_seconds(const CostModel& m, int nranks, size_t bytes);

// The schedule for an allreduce of `bytes` on `nranks`: `forced` unless it
// is kAuto, else the model's faster one.
AllreduceAlgo choose_allreduce(AllreduceAlgo forced, const CostModel& m, int nranks, size_t bytes);

}  // namespace rr::algo
