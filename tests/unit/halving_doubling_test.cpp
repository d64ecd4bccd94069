// Recursive halving and doubling (lib/algo/halving_doubling.hpp) as pure
// arithmetic: every block of every rank ends with every rank's contribution
// exactly once, partners agree on what they swap, and a rank that takes part
// sends 2(P-1)/P of the buffer.

#include "algo/halving_doubling.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace rr::algo {
namespace {

using Held = std::vector<std::multiset<int>>;  // per block: whose contributions it holds

TEST(HalvingDoubling, EveryBlockEndsWithEveryContributionOnce) {
  for (int n = 1; n <= 64; ++n) {
    std::vector<HalvingDoubling> plans;
    for (int r = 0; r < n; ++r) plans.emplace_back(n, r);
    const int p = plans[0].blocks();
    std::vector<Held> held(static_cast<size_t>(n), Held(static_cast<size_t>(p)));
    for (int r = 0; r < n; ++r) {
      for (auto& block : held[static_cast<size_t>(r)]) block.insert(r);
    }
    for (int r = 0; r < n; ++r) {  // the fold
      const int to = plans[static_cast<size_t>(r)].sits_out_for();
      if (to < 0) continue;
      for (int b = 0; b < p; ++b) {
        held[static_cast<size_t>(to)][static_cast<size_t>(b)].insert(r);
      }
    }
    const int rounds = plans[static_cast<size_t>(n - 1)].rounds();
    for (int k = 0; k < rounds; ++k) {  // reduce-scatter
      std::vector<Held> next = held;
      for (int r = 0; r < n; ++r) {
        const HalvingDoubling& me = plans[static_cast<size_t>(r)];
        if (me.sits_out_for() >= 0) continue;
        const int q = me.scatter_partner(k);
        const HalvingDoubling& them = plans[static_cast<size_t>(q)];
        ASSERT_EQ(them.scatter_partner(k), r) << n << " ranks, round " << k;
        const HalvingDoubling::Blocks keep = me.scatter_keep(k), sent = them.scatter_send(k);
        ASSERT_EQ(keep.first, sent.first) << "what rank " << r << " keeps is what rank " << q << " sends";
        ASSERT_EQ(keep.last, sent.last);
        ASSERT_EQ(keep.last - keep.first, p >> (k + 1));
        for (int b = keep.first; b < keep.last; ++b) {
          for (int c : held[static_cast<size_t>(q)][static_cast<size_t>(b)]) {
            next[static_cast<size_t>(r)][static_cast<size_t>(b)].insert(c);
          }
        }
      }
      held = next;
    }
    std::multiset<int> all;
    for (int r = 0; r < n; ++r) all.insert(r);
    for (int r = 0; r < n; ++r) {
      const HalvingDoubling& me = plans[static_cast<size_t>(r)];
      if (me.sits_out_for() >= 0 || rounds == 0) continue;
      const HalvingDoubling::Blocks own = me.scatter_keep(rounds - 1);
      ASSERT_EQ(own.last - own.first, 1);
      EXPECT_EQ(held[static_cast<size_t>(r)][static_cast<size_t>(own.first)], all) << n << " ranks, rank " << r;
    }
    for (int k = 0; k < rounds; ++k) {  // all-gather
      std::vector<Held> next = held;
      for (int r = 0; r < n; ++r) {
        const HalvingDoubling& me = plans[static_cast<size_t>(r)];
        if (me.sits_out_for() >= 0) continue;
        const int q = me.gather_partner(k);
        const HalvingDoubling::Blocks in = me.gather_recv(k), out = plans[static_cast<size_t>(q)].gather_send(k);
        ASSERT_EQ(plans[static_cast<size_t>(q)].gather_partner(k), r);
        ASSERT_EQ(in.first, out.first);
        ASSERT_EQ(in.last, out.last);
        for (int b = in.first; b < in.last; ++b) {
          next[static_cast<size_t>(r)][static_cast<size_t>(b)] = held[static_cast<size_t>(q)][static_cast<size_t>(b)];
        }
      }
      held = next;
    }
    for (int r = 0; r < n; ++r) {  // the hand-back
      const int from = plans[static_cast<size_t>(r)].sits_out_for();
      if (from >= 0) held[static_cast<size_t>(r)] = held[static_cast<size_t>(from)];
    }
    for (int r = 0; r < n; ++r) {
      for (int b = 0; b < p; ++b) {
        EXPECT_EQ(held[static_cast<size_t>(r)][static_cast<size_t>(b)], all) << n << " ranks, rank " << r << ", block " << b;
      }
    }
  }
}

TEST(HalvingDoubling, SendsTwoPMinusOneOverPOfTheBuffer) {
  for (int n : {2, 4, 8, 16, 64}) {
    for (int r = 0; r < n; ++r) {
      const HalvingDoubling plan(n, r);
      int blocks_sent = 0;
      for (int k = 0; k < plan.rounds(); ++k) {
        blocks_sent += plan.scatter_send(k).last - plan.scatter_send(k).first;
        blocks_sent += plan.gather_send(k).last - plan.gather_send(k).first;
      }
      EXPECT_EQ(blocks_sent, 2 * (n - 1)) << n << " ranks, rank " << r;  // of P = n blocks
    }
  }
}

}  // namespace
}  // namespace rr::algo
