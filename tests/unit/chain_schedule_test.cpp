// The chain's schedule (algo/chain.hpp) against a walk along the ring: for
// every rank count, root, kind and ring order, the positions make one chain
// (each position once), broadcast's head is the root, reduce's tail is the
// root, and each rank's left and right are its ring neighbours.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "algo/chain.hpp"

namespace rr::algo {
namespace {

void check(int n, const std::vector<int>& order_vec, bool use_order) {
  const int* order = use_order ? order_vec.data() : nullptr;
  for (int root = 0; root < n; ++root) {
    for (bool reduces : {false, true}) {
      std::vector<int> rank_at(n, -1);
      for (int r = 0; r < n; ++r) {
        const ChainSchedule s(n, r, root, reduces, order);
        ASSERT_GE(s.position(), 0);
        ASSERT_LT(s.position(), n);
        ASSERT_EQ(rank_at[s.position()], -1) << "two ranks at position " << s.position();
        rank_at[s.position()] = r;
        // Neighbours in the ring order.
        const int p = use_order ? static_cast<int>(std::find(order_vec.begin(), order_vec.end(), r) - order_vec.begin()) : r;
        const int left = use_order ? order_vec[(p + n - 1) % n] : (p + n - 1) % n;
        const int right = use_order ? order_vec[(p + 1) % n] : (p + 1) % n;
        EXPECT_EQ(s.left(), left) << "rank " << r;
        EXPECT_EQ(s.right(), right) << "rank " << r;
        EXPECT_EQ(s.heads(), s.position() == 0);
        EXPECT_EQ(s.ends(), s.position() == n - 1);
      }
      // Position k + 1 is the right neighbour of position k: one chain along the ring.
      for (int k = 0; k + 1 < n; ++k) {
        EXPECT_EQ(ChainSchedule(n, rank_at[k], root, reduces, order).right(), rank_at[k + 1]) << "position " << k;
      }
      if (reduces) {
        EXPECT_EQ(rank_at[n - 1], root) << n << " ranks: reduce ends at the root";
      } else {
        EXPECT_EQ(rank_at[0], root) << n << " ranks: broadcast starts at the root";
      }
    }
  }
}

TEST(ChainSchedule, OneChainAlongTheRingFromOrToTheRoot) {
  std::mt19937 rng(5);
  for (int n = 1; n <= 9; ++n) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    check(n, order, false);
    check(n, order, true);
    for (int trial = 0; trial < 5; ++trial) {
      std::shuffle(order.begin(), order.end(), rng);
      check(n, order, true);
    }
  }
}

}  // namespace
}  // namespace rr::algo
