// Split, use, destroy, many times: every communicator destroyed gives back
// everything it took (open fds, threads, mapped shared-memory segments),
// whichever rank destroys first. On two hosts (collectives_fake_hosts_cyclic)
// a rank whose peer had destroyed its split first heard that peer's
// endpoints fail while it closed its own, took it for a failure and left
// the split's whole UCX context behind (its sockets, epoll and timer fds
// and shared memory): in about one destroy in ten, found by the soak
// fuzzer over 1500 s (bench/RESULTS.md, "Resources across hosts").

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collectives_env.hpp"
#include "resources.hpp"  // tests/soak: what a process holds, and what it added

namespace {

using namespace collectives_env;

// One split of the world in reversed order, an allreduce that crosses every
// link, and its destroy, the ranks of odd rank a little later than the others
// (by 0 to 1.5 ms, changing per round), so that either side may close first.
void churn_once(int round) {
  rrComm_t split = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_size - 1 - g_rank, &split, nullptr), rrSuccess) << rrGetLastError(g_comm);
  std::vector<float> v(4096, 1.0f);
  ASSERT_EQ(rrAllReduce(v.data(), v.data(), v.size(), rrFloat32, rrSum, split, nullptr), rrSuccess)
      << rrGetLastError(split);
  ASSERT_EQ(v[4095], static_cast<float>(g_size));
  if (g_rank % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(500 * (round % 4)));
  ASSERT_EQ(rrCommDestroy(split), rrSuccess);
}

TEST(CommChurn, ADestroyedSplitGivesBackEverythingItTook) {
  if (g_size == 1) GTEST_SKIP() << "one rank: a split has no peers to close";
  churn_once(0);  // what the first split makes for good (the idle-progress thread)
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
  const soak::Inventory before = soak::take_inventory();
  const int threads_before = soak::sample_resources().threads;
  constexpr int kRounds = 24;
  for (int round = 1; round <= kRounds; ++round) {
    churn_once(round);
    if (HasFatalFailure()) return;
  }
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
  const soak::Inventory after = soak::take_inventory();
  EXPECT_EQ(after.fds.size(), before.fds.size()) << "rank " << g_rank << " holds more fds after " << kRounds
                                                 << " splits destroyed: " << soak::added(before.fds, after.fds);
  EXPECT_EQ(soak::sample_resources().threads, threads_before) << "rank " << g_rank;
  EXPECT_EQ(after.segments.size(), before.segments.size())
      << "rank " << g_rank << " maps more segments: " << soak::added(before.segments, after.segments);
}

}  // namespace
