#pragma once
// Which allreduce schedule a call takes, from an alpha-beta-gamma model of
// the machine: alpha seconds per message, beta seconds per byte moved,
// gamma seconds per byte reduced. On N ranks, for n bytes:
//   ring                2(N-1) alpha + 2(N-1)/N n beta + (N-1)/N n gamma
//   recursive doubling  (log2 P + f) alpha + (log2 P + f) n beta + (log2 P + f/2) n gamma,
//   halving-doubling    (2 log2 P + f) alpha + (2(P-1)/P + f) n beta + ((P-1)/P + f/2) n gamma
//                       plus one neighbour round trip (its argument check);
//                       predicted and logged, taken only when RR_ALGO=hd,
// with P the largest power of two <= N and f = 2 when N != P (the fold and
// the hand-back). The smaller predicted time wins; RR_ALGO forces one.
//
// On one host with slot rings the ring costs one more message (its argument
// check's round trip, which recursive doubling carries in its data) besides
// its 2(N-1) hand-overs, and each message costs slot_alpha instead of alpha
// unless ranks share cores.
//
// On one host with a shared-memory board (coll/one_shot.hpp), the one-shot
// schedule publishes each rank's buffer once and every rank reads and
// reduces all N, in rank order: one hand-over, whatever N,
//   one-shot            alpha + n beta + (N-1) n gamma
// (the copy in, then N - 1 reductions that read the peers' parts where they
// lie), up to the board's capacity per call (RR_SHM_BOARD_BYTES). It is
// taken whenever it is predicted no slower than the others. Measured, it
// stays faster than the ring up to about twice the size this predicts
// (bench/RESULTS.md, "Small messages and latency", "Where the one-shot and
// the ring cross").
//
// Across hosts (HostShape: H hosts, at most K ranks on one), messages
// between hosts cost remote_alpha instead of alpha. The ring, in its
// topology order, makes 2H of its 2(N-1) hops between hosts, each host's
// link carrying one flow: 2(N-H) alpha + 2H remote_alpha + the same bytes.
// ceil(log2 H) of recursive doubling's rounds pair ranks of different hosts,
// and in each of them all K ranks of a host send their whole buffer through
// its one link at once: remote_alpha + K n beta. (rr-sim, tools/rr_sim,
// showed what the single-host model got wrong: at 1 024 ranks of 8 per host
// it kept recursive doubling up to 2 MiB, 3.7 x slower there than the ring.)

#include <cstddef>
#include <string>

namespace rr::algo {

enum class AllreduceAlgo { kAuto, kRing, kRecursiveDoubling, kHalvingDoubling, kOneShot };

struct CostModel {
  double alpha_s = 2e-6;          // per message: UCX's shared-memory latency plus a wake-up on this machine
  double beta_s_per_byte = 1.5e-10;  // moving a byte: ~6.5 GB/s, single-thread memcpy here
  double gamma_s_per_byte = 2.5e-10;  // reducing a byte: ~4 GB/s for float32 sum
  // Per message between hosts; <= 0: alpha_s (one host, or a network as fast).
  double remote_alpha_s = 0;
  // Per message on one host whose ranks each have a core (a slot ring's
  // hand-over, or UCX's shared-memory eager message: a cache line or two
  // passed between cores), when the ring runs on slot rings; alpha_s (a
  // context switch per message) stays for ranks that share cores.
  double slot_alpha_s = 0.3e-6;
  double remote_alpha() const { return remote_alpha_s > 0 ? remote_alpha_s : alpha_s; }
};

// "ring", "rd" (recursive doubling), "hd" (halving-doubling), "oneshot" or "auto".
const char* algo_name(AllreduceAlgo algo);
// Parses RR_ALGO's value; false for anything else.
bool parse_algo(const std::string& text, AllreduceAlgo* out);

// Where the ranks run: how many hosts, and the most ranks on one of them.
struct HostShape {
  int hosts = 1;
  int ranks_per_host = 1;
  // One host whose ring runs on shared-memory slot rings (exec/shm_ring_executor.hpp):
  // the ring then pays its argument check's round trip (alpha) and a slot
  // hand-over per step; `shares_cores` when the host runs more ranks than cores.
  bool slot_rings = false;
  bool shares_cores = false;
  // One host with a shared-memory board holding this many bytes per
  // publication (0: none): the one-shot schedule's largest call.
  size_t board_bytes = 0;
};

// The model's predicted time of each schedule, in seconds.
double ring_seconds(const CostModel& m, int nranks, size_t bytes, const HostShape& shape = {});
double recursive_doubling_seconds(const CostModel& m, int nranks, size_t bytes, const HostShape& shape = {});
double halving_doubling_seconds(const CostModel& m, int nranks, size_t bytes, const HostShape& shape = {});
double one_shot_seconds(const CostModel& m, int nranks, size_t bytes, const HostShape& shape = {});

// The schedule for an allreduce of `bytes` on `nranks`: `forced` unless it
// is kAuto, else the model's faster one. One-shot needs the board: forced
// without one (across hosts, RR_SAME_HOST=ucx), the model chooses instead;
// forced beyond its capacity, it goes in pieces of that size.
AllreduceAlgo choose_allreduce(AllreduceAlgo forced, const CostModel& m, int nranks, size_t bytes,
                               const HostShape& shape = {});

}  // namespace rr::algo
