// The ring's order on real ranks (rrCommGetRingOrder): each host's ranks
// one after another, hosts in the order of their lowest rank, ranks of a
// host in rank order (RR_RING_ORDER=topology, the default), or rank order
// (RR_RING_ORDER=rank). On one host both are rank order; under
// tests/integration/fake_hosts.sh (hosts as UTS namespaces with their own
// hostnames, placed cyclically) they differ, and the rest of
// collectives_test then runs every collective on the reordered ring.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "collectives_env.hpp"

using namespace collectives_env;

namespace {

// A hash of this rank's hostname, which is what tells fake hosts apart.
int64_t host_hash() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char* c = name; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

TEST(RingOrder, KeepsEachHostsRanksTogether) {
  std::vector<int64_t> hosts(static_cast<size_t>(g_size));
  const int64_t mine = host_hash();
  ASSERT_EQ(rrAllGather(&mine, hosts.data(), 1, rrInt64, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  // The expected order, spelled out: hosts by their lowest rank, then ranks.
  std::vector<int> expected;
  const char* setting = std::getenv("RR_RING_ORDER");
  if (setting && std::strcmp(setting, "rank") == 0) {
    for (int r = 0; r < g_size; ++r) expected.push_back(r);
  } else {
    std::vector<int64_t> seen;
    for (int r = 0; r < g_size; ++r) {
      if (std::find(seen.begin(), seen.end(), hosts[static_cast<size_t>(r)]) != seen.end()) continue;
      seen.push_back(hosts[static_cast<size_t>(r)]);
      for (int q = r; q < g_size; ++q) {
        if (hosts[static_cast<size_t>(q)] == hosts[static_cast<size_t>(r)]) expected.push_back(q);
      }
    }
  }
  std::vector<int> order(static_cast<size_t>(g_size), -1);
  ASSERT_EQ(rrCommGetRingOrder(g_comm, order.data()), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(order, expected);
  EXPECT_EQ(rrCommGetRingOrder(g_comm, nullptr), rrInvalidArgument);
}

// A sub-communicator orders its own ranks the same way.
TEST(RingOrder, SubCommunicatorsFollowTheirHostsToo) {
  rrComm_t sub = nullptr;
  // Reversed key: the sub-communicator numbers the ranks backwards.
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_size - g_rank, &sub, nullptr), rrSuccess) << rrGetLastError(g_comm);
  int sub_rank = -1;
  ASSERT_EQ(rrCommUserRank(sub, &sub_rank), rrSuccess);
  std::vector<int64_t> hosts(static_cast<size_t>(g_size));
  const int64_t mine = host_hash();
  ASSERT_EQ(rrAllGather(&mine, hosts.data(), 1, rrInt64, sub, nullptr), rrSuccess) << rrGetLastError(sub);
  std::vector<int> order(static_cast<size_t>(g_size), -1);
  ASSERT_EQ(rrCommGetRingOrder(sub, order.data()), rrSuccess) << rrGetLastError(sub);
  const char* setting = std::getenv("RR_RING_ORDER");
  if (!(setting && std::strcmp(setting, "rank") == 0)) {
    // Each host's ranks in one run of the ring.
    int runs = 0;
    for (int p = 0; p < g_size; ++p) {
      const int64_t here = hosts[static_cast<size_t>(order[static_cast<size_t>(p)])];
      const int64_t before = hosts[static_cast<size_t>(order[static_cast<size_t>((p + g_size - 1) % g_size)])];
      runs += here != before ? 1 : 0;
    }
    std::vector<int64_t> distinct = hosts;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    EXPECT_EQ(runs, distinct.size() > 1 ? static_cast<int>(distinct.size()) : 0);
  }
  // And the ring still reduces right on it.
  std::vector<float> data(100003, static_cast<float>(sub_rank + 1));
  ASSERT_EQ(rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, sub, nullptr), rrSuccess)
      << rrGetLastError(sub);
  for (float x : data) ASSERT_EQ(x, static_cast<float>(g_size * (g_size + 1) / 2));
  ASSERT_EQ(rrCommDestroy(sub), rrSuccess);
}

}  // namespace
