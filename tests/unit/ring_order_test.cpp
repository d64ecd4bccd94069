// The topology ring order (lib/algo/ring_order.hpp) as pure arithmetic:
// block, cyclic and random placements of 1 to 64 ranks on 1 to 16 hosts.

#include "algo/ring_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace rr::algo {
namespace {

std::vector<int> block(int ranks, int hosts) {
  std::vector<int> host(static_cast<size_t>(ranks));
  const int per_host = (ranks + hosts - 1) / hosts;
  for (int r = 0; r < ranks; ++r) host[static_cast<size_t>(r)] = r / per_host;
  return host;
}

std::vector<int> cyclic(int ranks, int hosts) {
  std::vector<int> host(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) host[static_cast<size_t>(r)] = r % hosts;
  return host;
}

std::vector<int> random_placement(int ranks, int hosts, uint32_t seed) {
  std::vector<int> host(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
    host[static_cast<size_t>(r)] = static_cast<int>(seed % static_cast<uint32_t>(hosts)) * 7 + 3;  // any ints
  }
  return host;
}

// What every topology order must be: a permutation; each host's ranks one
// after another, in rank order; hosts in the order of their lowest rank.
void check_order(const std::vector<int>& host) {
  const int n = static_cast<int>(host.size());
  const std::vector<int> order = topology_ring_order(host);
  ASSERT_EQ(order.size(), host.size());
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int r = 0; r < n; ++r) ASSERT_EQ(sorted[static_cast<size_t>(r)], r) << "not a permutation";
  const std::set<int> hosts(host.begin(), host.end());
  EXPECT_EQ(host_crossings(order, host), hosts.size() > 1 ? static_cast<int>(hosts.size()) : 0)
      << "a host's ranks are not consecutive in the ring";
  std::vector<int> first_seen;
  for (int p = 0; p < n; ++p) {
    const int r = order[static_cast<size_t>(p)];
    const int h = host[static_cast<size_t>(r)];
    if (first_seen.empty() || first_seen.back() != h) first_seen.push_back(h);
    if (p > 0 && host[static_cast<size_t>(order[static_cast<size_t>(p - 1)])] == h) {
      EXPECT_LT(order[static_cast<size_t>(p - 1)], r) << "ranks of a host out of rank order";
    }
  }
  std::vector<int> by_lowest_rank;
  for (int r = 0; r < n; ++r) {
    const int h = host[static_cast<size_t>(r)];
    if (std::find(by_lowest_rank.begin(), by_lowest_rank.end(), h) == by_lowest_rank.end()) by_lowest_rank.push_back(h);
  }
  EXPECT_EQ(first_seen, by_lowest_rank) << "hosts not in the order of their lowest rank";
  const std::vector<int> position = ring_positions(order);
  for (int p = 0; p < n; ++p) EXPECT_EQ(position[static_cast<size_t>(order[static_cast<size_t>(p)])], p);
}

TEST(RingOrder, EveryPlacementOfUpTo64RanksOnUpTo16Hosts) {
  for (int ranks = 1; ranks <= 64; ++ranks) {
    for (int hosts = 1; hosts <= 16; ++hosts) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(hosts) + " hosts");
      check_order(block(ranks, hosts));
      check_order(cyclic(ranks, hosts));
      check_order(random_placement(ranks, hosts, 0x9e3779b9u * static_cast<uint32_t>(ranks * 17 + hosts)));
    }
  }
}

TEST(RingOrder, BlockPlacementKeepsRankOrder) {
  for (int ranks = 1; ranks <= 64; ++ranks) {
    for (int hosts = 1; hosts <= 16; ++hosts) {
      const std::vector<int> order = topology_ring_order(block(ranks, hosts));
      for (int p = 0; p < ranks; ++p) ASSERT_EQ(order[static_cast<size_t>(p)], p);
    }
  }
}

TEST(RingOrder, CyclicPlacementVisitsEachHostOnce) {
  // Slurm's cyclic distribution of 8 ranks on 4 hosts: rank i on host i mod 4.
  const std::vector<int> host = cyclic(8, 4);
  EXPECT_EQ(topology_ring_order(host), (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  // In rank order the ring leaves its host at every step.
  std::vector<int> rank_order(8);
  for (int r = 0; r < 8; ++r) rank_order[static_cast<size_t>(r)] = r;
  EXPECT_EQ(host_crossings(rank_order, host), 8);
  EXPECT_EQ(host_crossings(topology_ring_order(host), host), 4);
}

TEST(RingOrder, NumaNodesOrderTheRanksOfAHost) {
  // One host, two NUMA nodes, ranks alternating between them.
  const std::vector<int> host(6, 0);
  const std::vector<int> numa = {0, 1, 0, 1, 0, 1};
  EXPECT_EQ(topology_ring_order(host, numa), (std::vector<int>{0, 2, 4, 1, 3, 5}));
  // Unknown (-1) keeps rank order.
  EXPECT_EQ(topology_ring_order(host, std::vector<int>(6, -1)), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace rr::algo
