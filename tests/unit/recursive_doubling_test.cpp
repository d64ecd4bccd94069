// Recursive doubling's plan (algo/recursive_doubling.hpp) and the size-based
// selector (algo/select.hpp), as arithmetic: every rank count from 1 to 64,
// with the data flow simulated as sets of contributing ranks.

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algo/recursive_doubling.hpp"
#include "algo/select.hpp"

namespace {

using rr::algo::RecursiveDoubling;

TEST(RecursiveDoubling, EveryRankEndsWithEveryContributionOnce) {
  for (int n = 1; n <= 64; ++n) {
    std::vector<RecursiveDoubling> plans;
    std::vector<std::multiset<int>> held(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      plans.emplace_back(n, r);
      held[static_cast<size_t>(r)].insert(r);
    }
    // The fold: each even rank of a pair hands its values to the odd one.
    for (int r = 0; r < n; ++r) {
      const int to = plans[static_cast<size_t>(r)].sits_out_for();
      if (to < 0) continue;
      ASSERT_EQ(plans[static_cast<size_t>(to)].folds_in(), r) << n << " ranks, rank " << r;
      held[static_cast<size_t>(to)].insert(held[static_cast<size_t>(r)].begin(), held[static_cast<size_t>(r)].end());
    }
    int rounds = -1;
    for (int r = 0; r < n; ++r) {
      if (plans[static_cast<size_t>(r)].sits_out_for() >= 0) continue;
      if (rounds < 0) rounds = plans[static_cast<size_t>(r)].rounds();
      EXPECT_EQ(plans[static_cast<size_t>(r)].rounds(), rounds) << "every active rank takes the same rounds";
    }
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::multiset<int>> next = held;
      for (int r = 0; r < n; ++r) {
        const RecursiveDoubling& p = plans[static_cast<size_t>(r)];
        if (p.sits_out_for() >= 0) continue;
        const int q = p.partner(round);
        ASSERT_GE(q, 0);
        ASSERT_LT(q, n);
        ASSERT_NE(q, r);
        EXPECT_EQ(plans[static_cast<size_t>(q)].sits_out_for(), -1) << "a partner never sits out";
        EXPECT_EQ(plans[static_cast<size_t>(q)].partner(round), r) << n << " ranks, round " << round;
        next[static_cast<size_t>(r)].insert(held[static_cast<size_t>(q)].begin(), held[static_cast<size_t>(q)].end());
      }
      held = next;
    }
    // The hand-back.
    for (int r = 0; r < n; ++r) {
      const int to = plans[static_cast<size_t>(r)].sits_out_for();
      if (to >= 0) held[static_cast<size_t>(r)] = held[static_cast<size_t>(to)];
    }
    std::multiset<int> all;
    for (int r = 0; r < n; ++r) all.insert(r);
    for (int r = 0; r < n; ++r) EXPECT_EQ(held[static_cast<size_t>(r)], all) << n << " ranks, rank " << r;
    int pow2 = 1, log2 = 0;
    while (pow2 * 2 <= n) pow2 *= 2, ++log2;
    EXPECT_EQ(rounds < 0 ? 0 : rounds, log2) << n << " ranks";
  }
}

TEST(RecursiveDoubling, MessagesSentPerRank) {
  // 6 ranks: P = 4, R = 2; ranks 0 and 2 sit out, 1 and 3 fold them in.
  const int expected[6] = {1, 3, 1, 3, 2, 2};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(RecursiveDoubling(6, r).messages_sent(), expected[r]) << "rank " << r;
  for (int r = 0; r < 8; ++r) EXPECT_EQ(RecursiveDoubling(8, r).messages_sent(), 3);
  EXPECT_EQ(RecursiveDoubling(1, 0).messages_sent(), 0);
}

TEST(Select, SmallMessagesTakeRecursiveDoublingLargeOnesTheRing) {
  using rr::algo::AllreduceAlgo;
  const rr::algo::CostModel model;
  for (int n = 2; n <= 64; ++n) {
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 8), AllreduceAlgo::kRecursiveDoubling) << n;
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, size_t{64} << 20), AllreduceAlgo::kRing) << n;
    // Forced either way.
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kRing, model, n, 8), AllreduceAlgo::kRing);
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kRecursiveDoubling, model, n, size_t{64} << 20),
              AllreduceAlgo::kRecursiveDoubling);
  }
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 1, 8), AllreduceAlgo::kRing);
  // The model's closed forms at one point: 2 ranks, 1 MB.
  EXPECT_DOUBLE_EQ(rr::algo::ring_seconds(model, 2, 1000000),
                   2 * model.alpha_s + 1e6 * model.beta_s_per_byte + 0.5e6 * model.gamma_s_per_byte);
  EXPECT_DOUBLE_EQ(rr::algo::recursive_doubling_seconds(model, 2, 1000000),
                   model.alpha_s + 1e6 * model.beta_s_per_byte + 1e6 * model.gamma_s_per_byte);
  rr::algo::AllreduceAlgo parsed;
  EXPECT_TRUE(rr::algo::parse_algo("rd", &parsed));
  EXPECT_EQ(parsed, AllreduceAlgo::kRecursiveDoubling);
  EXPECT_FALSE(rr::algo::parse_algo("tree", &parsed));
}

// One host with slot rings: each rank on a core of its own passes messages
// at slot_alpha, so the ring takes over at a few KiB (measured: 4 KiB on 2
// ranks, bench/RESULTS.md, "Small messages and latency"); ranks sharing
// cores pay alpha per hand-over, so recursive doubling keeps sizes ten times
// larger.
TEST(Select, SlotRingsMoveTheCrossoverByWhetherRanksShareCores) {
  using rr::algo::AllreduceAlgo;
  const rr::algo::CostModel model;
  rr::algo::HostShape own_cores;
  own_cores.slot_rings = true;
  rr::algo::HostShape shared = own_cores;
  shared.shares_cores = true;
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 2, 1024, own_cores), AllreduceAlgo::kRecursiveDoubling);
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 2, 8192, own_cores), AllreduceAlgo::kRing);
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 4, 8192, shared), AllreduceAlgo::kRecursiveDoubling);
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 4, 65536, shared), AllreduceAlgo::kRing);
  for (int n = 2; n <= 8; ++n) {
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 8, own_cores), AllreduceAlgo::kRecursiveDoubling) << n;
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 8, shared), AllreduceAlgo::kRecursiveDoubling) << n;
  }
  // The closed form: the check's message and 2(N-1) hand-overs at slot_alpha.
  EXPECT_DOUBLE_EQ(rr::algo::ring_seconds(model, 2, 1000000, own_cores),
                   3 * model.slot_alpha_s + 1e6 * model.beta_s_per_byte + 0.5e6 * model.gamma_s_per_byte);
  EXPECT_DOUBLE_EQ(rr::algo::ring_seconds(model, 2, 1000000, shared),
                   3 * model.alpha_s + 1e6 * model.beta_s_per_byte + 0.5e6 * model.gamma_s_per_byte);
}

TEST(Select, TheBoardTakesSmallCallsOnOneHostUpToItsCapacity) {
  using rr::algo::AllreduceAlgo;
  const rr::algo::CostModel model;
  rr::algo::HostShape board;
  board.slot_rings = true;
  board.board_bytes = 32768;
  rr::algo::HostShape shared = board;
  shared.shares_cores = true;
  for (int n = 2; n <= 8; ++n) {
    // A few bytes: one hand-over beats log2(N) round trips and 2(N-1) hops.
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 8, board), AllreduceAlgo::kOneShot) << n;
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 8, shared), AllreduceAlgo::kOneShot) << n;
    // Beyond the board's capacity, never; near it, the ring's smaller share of the reduction wins.
    EXPECT_NE(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 32832, shared), AllreduceAlgo::kOneShot) << n;
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, n, 32768, board), AllreduceAlgo::kRing) << n;
  }
  // Every rank reduces all N parts: the crossover falls as N grows.
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 2, 4096, board), AllreduceAlgo::kOneShot);
  EXPECT_NE(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 8, 4096, board), AllreduceAlgo::kOneShot);
  // The closed form: one hand-over, the copy in, N - 1 reductions.
  EXPECT_DOUBLE_EQ(rr::algo::one_shot_seconds(model, 4, 1000, board),
                   model.slot_alpha_s + 1000 * model.beta_s_per_byte + 3000 * model.gamma_s_per_byte);
  EXPECT_DOUBLE_EQ(rr::algo::one_shot_seconds(model, 4, 1000, shared),
                   model.alpha_s + 1000 * model.beta_s_per_byte + 3000 * model.gamma_s_per_byte);
  // Without a board (across hosts, RR_SAME_HOST=ucx, RR_SHM_BOARD_BYTES=0)
  // neither the model nor RR_ALGO=oneshot takes it.
  rr::algo::HostShape none = board;
  none.board_bytes = 0;
  rr::algo::HostShape hosts = board;
  hosts.hosts = 2;
  for (const rr::algo::HostShape& shape : {none, hosts}) {
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kAuto, model, 4, 8, shape), AllreduceAlgo::kRecursiveDoubling);
    EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kOneShot, model, 4, 8, shape), AllreduceAlgo::kRecursiveDoubling);
  }
  // Forced, it takes any size (in pieces of the board's capacity).
  EXPECT_EQ(rr::algo::choose_allreduce(AllreduceAlgo::kOneShot, model, 4, size_t{1} << 26, board), AllreduceAlgo::kOneShot);
  AllreduceAlgo parsed = AllreduceAlgo::kAuto;
  EXPECT_TRUE(rr::algo::parse_algo("oneshot", &parsed));
  EXPECT_EQ(parsed, AllreduceAlgo::kOneShot);
}

}  // namespace
