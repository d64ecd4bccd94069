// rr-sim (tools/rr_sim) against closed forms: the engine's schedules over
// the simulated network must take exactly what the alpha-beta model of each
// says where the model is exact, and the ring order must do what it is for.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "algo/select.hpp"
#include "shrink.hpp"
#include "sim.hpp"
#include "units.hpp"

namespace rrsim {
namespace {

Machine one_rank_per_host(int n, double alpha, double link) {
  Machine m;
  m.ranks = n;
  m.alpha_s = alpha;
  m.link_Bps = link;
  return m;
}

Engine plain(size_t chunk_bytes) {
  Engine e;
  e.chunk_bytes = chunk_bytes;
  e.check_arguments = false;
  return e;
}

// One message per segment: 2(N-1)(alpha + (S/N)/B), the closed form.
TEST(RrSim, RingOfOneMessagePerSegmentIsTheClosedForm) {
  for (int n : {2, 3, 4, 8, 16, 1024}) {
    const size_t bytes = size_t{64} << 20;
    const double alpha = 5e-6, link = 100e9 / 8;
    const Result r = simulate_ring(one_rank_per_host(n, alpha, link), plain(bytes), bytes);
    const double segment = static_cast<double>(bytes / 4 / static_cast<size_t>(n) * 4);
    const double expect = 2.0 * (n - 1) * (alpha + segment / link);
    EXPECT_NEAR(r.seconds, expect, expect * 1e-4) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(2 * (n - 1) * n));
  }
}

// Chunk columns in flight and no per-message latency: every link stays busy,
// and the ring meets its bandwidth bound 2(N-1)/N S/B exactly.
TEST(RrSim, PipelinedRingMeetsTheBandwidthBound) {
  for (int n : {2, 4, 5}) {
    for (size_t columns : {size_t{2}, size_t{4}, size_t{8}}) {
      const size_t chunk = size_t{64} << 10;
      const size_t bytes = chunk * columns * static_cast<size_t>(n);
      Engine e = plain(chunk);
      e.pipeline_depth = static_cast<int>(columns);
      const double link = 1e9;
      const Result r = simulate_ring(one_rank_per_host(n, 0.0, link), e, bytes);
      const double expect = 2.0 * (n - 1) / n * static_cast<double>(bytes) / link;
      EXPECT_NEAR(r.seconds, expect, expect * 1e-9) << n << " ranks, " << columns << " columns";
    }
  }
}

// A power of two: log2 N exchanges of the whole buffer and its 32-byte
// header, each reduced once on arrival.
TEST(RrSim, RecursiveDoublingOnAPowerOfTwo) {
  for (int n : {2, 4, 8, 64, 4096}) {
    Machine m = one_rank_per_host(n, 2e-6, 10e9);
    m.reduce_Bps = 4e9;
    const size_t bytes = 4096;
    const Result r = simulate_recursive_doubling(m, plain(size_t{512} << 10), bytes);
    const double rounds = std::log2(n);
    const double expect = rounds * (2e-6 + (bytes + 32.0) / 10e9 + bytes / 4e9);
    EXPECT_NEAR(r.seconds, expect, expect * 1e-9) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(rounds * n));
  }
}

// One-shot on one host: each rank's copy into its cell, seen local alpha
// later, then N - 1 reductions: S/L + local alpha + (N-1) S/R whatever N; in
// board-sized pieces, one after another, beyond the board.
TEST(RrSim, OneShotIsOneHandOverAndNMinusOneReductions) {
  for (int n : {2, 4, 8, 64}) {
    Machine m;
    m.ranks = n;
    m.ranks_per_host = n;
    m.local_alpha_s = 0.3e-6;
    m.local_Bps = 8e9;
    m.reduce_Bps = 4e9;
    const size_t bytes = 4096;
    const Result r = simulate_one_shot(m, plain(size_t{512} << 10), bytes);
    const double expect = bytes / 8e9 + 0.3e-6 + (n - 1) * (bytes / 4e9);
    EXPECT_NEAR(r.seconds, expect, expect * 1e-9) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(n)) << "one publication per rank";
    EXPECT_EQ(r.bytes_between_hosts, 0u);
    Engine small = plain(size_t{512} << 10);
    small.board_bytes = 1024;  // four pieces
    const Result pieces = simulate_one_shot(m, small, bytes);
    EXPECT_NEAR(pieces.seconds, 4 * (1024 / 8e9 + 0.3e-6 + (n - 1) * (1024 / 4e9)), expect * 1e-9) << n << " ranks";
  }
}

// Not a power of two: the fold adds one message and one reduction to the
// critical path, and the hand-back overlaps the last round (the ranks that
// did not fold sent their round-0 messages at once, so a folding rank's
// rounds end one reduction after its own send): (log2 P + 1) x (message +
// reduction), worked out by hand for 3, 6 and 12 ranks.
TEST(RrSim, RecursiveDoublingWithTheFold) {
  for (int n : {3, 6, 12}) {
    Machine m = one_rank_per_host(n, 2e-6, 10e9);
    m.reduce_Bps = 4e9;
    const size_t bytes = 1024;
    const Result r = simulate_recursive_doubling(m, plain(size_t{512} << 10), bytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    const double message = 2e-6 + (bytes + 32.0) / 10e9, reduce = bytes / 4e9;
    const double expect = (std::log2(p) + 1) * (message + reduce);
    EXPECT_NEAR(r.seconds, expect, expect * 1e-9) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(2 * (n - p) + std::log2(p) * p)) << n << " ranks";
  }
}

// Halving-doubling on a power of two, one piece per round: log2 P halving
// rounds of S/2, S/4, ... (each reduced), log2 P doubling rounds back up:
// 2 log2 P alpha + 2(P-1)/P S/B + (P-1)/P S/R.
TEST(RrSim, HalvingDoublingOnAPowerOfTwo) {
  for (int n : {2, 4, 8, 64, 1024}) {
    Machine m = one_rank_per_host(n, 2e-6, 10e9);
    m.reduce_Bps = 4e9;
    const size_t bytes = size_t{4} << 20;
    const Result r = simulate_halving_doubling(m, plain(bytes), bytes);
    const double share = (n - 1.0) / n;
    const double expect = 2 * std::log2(n) * 2e-6 + 2 * share * bytes / 10e9 + share * bytes / 4e9;
    EXPECT_NEAR(r.seconds, expect, expect * 1e-9) << n << " ranks";
    EXPECT_EQ(r.messages, static_cast<uint64_t>(2 * std::log2(n) * n));
  }
}

// Several ranks per host, placed cyclically: in rank order every ring hop
// leaves its host, so each NIC carries K flows; the topology order crosses
// each NIC once, and is K times faster when the link is the limit.
TEST(RrSim, TopologyOrderFreesTheHostLinkUnderCyclicPlacement) {
  Machine m = one_rank_per_host(16, 0.0, 1e9);
  m.ranks_per_host = 4;
  m.cyclic = true;
  m.local_Bps = 100e9;
  m.local_alpha_s = 0;
  Engine topology = plain(size_t{1} << 30), rank_order = plain(size_t{1} << 30);
  rank_order.topology_order = false;
  const size_t bytes = size_t{64} << 20;
  const Result fast = simulate_ring(m, topology, bytes);
  const Result slow = simulate_ring(m, rank_order, bytes);
  EXPECT_GT(slow.seconds / fast.seconds, 3.5) << "rank order " << slow.seconds << " s, topology " << fast.seconds << " s";
  EXPECT_EQ(ring_order(m, topology), std::vector<int>({0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}));
  // Between hosts, the topology ring moves a quarter of the rank order's bytes.
  EXPECT_EQ(slow.bytes_between_hosts, 4 * fast.bytes_between_hosts);
}

// The engine's selector (algo/select.hpp), told how many ranks share each
// host's link, picks what the simulation finds faster, or one within 25 %
// of it near the crossover. Without the shape it kept recursive doubling at
// 2 MiB on 1 024 ranks of 8 per host, which the simulation finds 3.7 x slower.
TEST(RrSim, SelectorAgreesWithTheSimulationAcrossHosts) {
  for (int n : {64, 1024}) {
    Machine m = one_rank_per_host(n, 5e-6, 100e9 / 8);
    m.ranks_per_host = 8;
    m.cyclic = true;
    rr::algo::CostModel model;
    model.alpha_s = m.local_alpha_s;
    model.remote_alpha_s = m.alpha_s;
    model.beta_s_per_byte = 1.0 / m.link_Bps;
    model.gamma_s_per_byte = 0;
    rr::algo::HostShape shape;
    shape.hosts = m.hosts();
    shape.ranks_per_host = m.ranks_per_host;
    const Engine e;
    for (size_t bytes = 8; bytes <= (size_t{64} << 20); bytes *= 4) {
      const double ring = simulate_ring(m, e, bytes).seconds;
      const double rd = simulate_recursive_doubling(m, e, bytes).seconds;
      const bool picks_rd = rr::algo::choose_allreduce(rr::algo::AllreduceAlgo::kAuto, model, n, bytes, shape) ==
                            rr::algo::AllreduceAlgo::kRecursiveDoubling;
      const double picked = picks_rd ? rd : ring, best = std::min(ring, rd);
      EXPECT_LE(picked, best * 1.25) << n << " ranks, " << bytes << " B: picked " << (picks_rd ? "rd" : "ring")
                                     << " (" << picked << " s), ring " << ring << " s, rd " << rd << " s";
    }
  }
  Machine m = one_rank_per_host(1024, 5e-6, 100e9 / 8);
  m.ranks_per_host = 8;
  m.cyclic = true;
  const size_t two_mib = size_t{2} << 20;
  EXPECT_GT(simulate_recursive_doubling(m, Engine(), two_mib).seconds / simulate_ring(m, Engine(), two_mib).seconds, 3.0);
}

TEST(RrSim, ShrinkFailedIsOneAllToAllPerRoundThenTheShrinksTwoThenOneRoundMore) {
  // 4 hosts of 2; rank 7 lost (every 8th): 7 survivors, hosts of 2, 2, 2, 1.
  rrsim::Machine m;
  m.ranks = 8;
  m.ranks_per_host = 2;
  m.alpha_s = 5e-6;
  m.link_Bps = 1e6;  // slow: the NIC bounds each all-to-all
  rrsim::ShrinkModel s;
  s.lost = 1;
  s.overhead_s = 1e-9;
  s.connect_s = 0.5;
  const rrsim::ShrinkResult one = rrsim::simulate_shrink_failed(m, s);
  EXPECT_EQ(one.survivors, 7);
  EXPECT_EQ(one.rounds, 2);  // the agreement's, and the confirming one after the shrink
  EXPECT_EQ(one.agreement_messages, 2u * 7u * 6u);
  const double set_bytes = 12 + 1;  // 8 ranks: one byte of set
  // A host of 2 among 7 sends 2 x 5 messages out.
  EXPECT_NEAR(one.agreement_s, 2 * (2 * 5 * set_bytes / m.link_Bps + m.alpha_s), 1e-9);
  const double offer = 4 * (3 + 1) + s.address_bytes;
  EXPECT_NEAR(one.shrink_s, (2 * 5 * offer / m.link_Bps + m.alpha_s) + 0.5 + (2 * 5 * 1 / m.link_Bps + m.alpha_s), 1e-9);
  EXPECT_EQ(one.shrink_messages, 2u * 7u * 6u);
  // One more death during it: two rounds more, and the detection.
  s.die_during = 1;
  const rrsim::ShrinkResult two = rrsim::simulate_shrink_failed(m, s);
  EXPECT_EQ(two.survivors, 6);
  EXPECT_EQ(two.rounds, 4);
  EXPECT_EQ(two.agreement_messages, 4u * 6u * 5u);
  EXPECT_GT(two.agreement_s, 4 * (2 * 4 * set_bytes / m.link_Bps) + s.detect_s);
}

TEST(RrSim, UnitsParseAsDocumented) {
  EXPECT_EQ(parse_bytes("--size", "64M"), size_t{64} << 20);
  EXPECT_EQ(parse_bytes("--size", "4096"), 4096u);
  EXPECT_DOUBLE_EQ(parse_rate("--link", "100Gbit"), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_rate("--link", "100Gbit/s"), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_rate("--link", "12.5GB/s"), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_rate("--link", "1e9"), 1e9);
  EXPECT_DOUBLE_EQ(parse_seconds("--alpha", "5us"), 5e-6);
  EXPECT_DOUBLE_EQ(parse_seconds("--alpha", "5e-6"), 5e-6);
  EXPECT_THROW(parse_rate("--link", "fast"), std::invalid_argument);
  EXPECT_THROW(parse_seconds("--alpha", "5 parsecs"), std::invalid_argument);
}

}  // namespace
}  // namespace rrsim
