// rrCommShrink (ULFM's MPI_Comm_shrink) with the caller's list, on forked
// ranks: at 2 to 6 ranks each rank in turn is SIGKILLed at a random moment
// of a loop of every collective; every survivor's call fails, each revokes
// and shrinks the victim away, and the next 100 collectives on the new
// communicator are exact (int32) against a reference; the same over UCX's
// TCP lanes alone, as between hosts. Two ranks killed at
// once; a rank killed during the shrink itself (the others fail naming it,
// never hang); bad lists refused before anything is sent; survivors that
// pass different lists fail naming both.

#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shrink_world.hpp"
#include "world.hpp"

namespace {

using namespace fault_world;

// `n` ranks loop over every collective; each rank in `victims` SIGKILLs
// itself at the start of loop step `kill_at`. The survivors fail, revoke,
// shrink the victims away and check 100 collectives after.
std::vector<Outcome> kill_and_shrink(int n, const std::set<int>& victims, int kill_at) {
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (!victims.count(r)) survivors.push_back(r);
  }
  const std::vector<int> excluded(victims.begin(), victims.end());
  return run_world(n, 20000, victims, [&](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (victims.count(rank) && i == kill_at) raise(SIGKILL);
      const rrResult_t r = one_collective(comm, i, rank, n);
      if (r != rrSuccess) break;
      if (i > kill_at + 1000) {
        std::snprintf(out->error, sizeof(out->error), "no call failed");
        return;
      }
    }
    if (rrCommRevoke(comm) != rrSuccess) _exit(5);
    rrComm_t next = nullptr;
    const auto t0 = Clock::now();
    out->result = rrCommShrink(comm, excluded.data(), static_cast<int>(excluded.size()), &next, nullptr);
    out->seconds = seconds_since(t0);
    if (out->result != rrSuccess) {
      note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
      return;
    }
    if (!check_after(next, rank, survivors, out)) out->result = -2;
    (void)rrCommDestroy(next);
    (void)rrCommDestroy(comm);
  });
}

using Shrink = NoShmLeft;

TEST_F(Shrink, EveryRankInTurnKilledAtARandomMomentIsShrunkAway) {
  every_rank_in_turn(2, 6, 12345, [](int n, int victim, int kill_at) {
    const std::vector<Outcome> outcomes = kill_and_shrink(n, {victim}, kill_at);
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      const Outcome& o = outcomes[static_cast<size_t>(r)];
      EXPECT_EQ(o.result, rrSuccess) << "rank " << r << ": " << o.error;
      EXPECT_LT(o.seconds, 10.0) << "far from the timeout: " << o.error;
    }
  });
}

TEST_F(Shrink, OverUcxTcpEveryRankInTurnIsShrunkAway) {
  // As between hosts: UCX's TCP lanes only, no same-host slot rings or board.
  setenv("RR_SAME_HOST", "ucx", 1);  // the forked ranks inherit both
  setenv("UCX_TLS", "tcp,self", 1);
  for (int n : {3, 4}) {
    for (int victim = 0; victim < n; ++victim) {
      SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(victim) + " killed");
      const std::vector<Outcome> outcomes = kill_and_shrink(n, {victim}, 3 + victim);
      for (int r = 0; r < n; ++r) {
        if (r == victim) continue;
        EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << "rank " << r << ": " << outcomes[static_cast<size_t>(r)].error;
      }
    }
  }
  unsetenv("RR_SAME_HOST");
  unsetenv("UCX_TLS");
}

TEST_F(Shrink, TwoRanksKilledAtOnceAreShrunkAway) {
  const std::vector<Outcome> outcomes = kill_and_shrink(6, {1, 4}, 9);
  print(outcomes, {1, 4});
  for (int r : {0, 2, 3, 5}) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << "rank " << r << ": " << outcomes[static_cast<size_t>(r)].error;
  }
}

TEST_F(Shrink, ARankKilledDuringTheShrinkIsNamedNeverWaitedFor) {
  // Rank 3 dies; ranks 0-2 shrink it away, but rank 2 dies as it enters the
  // shrink: ranks 0 and 1 fail naming rank 2 among the ranks gone beyond
  // the list (with the other of the two, where it failed and left first),
  // far sooner than the 20 s timeout.
  auto outcomes = run_world(4, 20000, {2, 3}, [](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (rank == 3 && i == 4) raise(SIGKILL);
      if (one_collective(comm, i, rank, 4) != rrSuccess) break;
    }
    (void)rrCommRevoke(comm);
    if (rank == 2) raise(SIGKILL);
    const int dead[] = {3};
    rrComm_t next = nullptr;
    const auto t0 = Clock::now();
    out->result = rrCommShrink(comm, dead, 1, &next, nullptr);
    out->seconds = seconds_since(t0);
    note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
    if (next) out->result = -2;
  });
  print(outcomes, {2, 3});
  for (int r : {0, 1}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
    const std::string other = r == 0 ? "{1, 2}" : "{0, 2}";  // the other survivor, where it failed and left first
    EXPECT_TRUE(has(o, "outside excludeRanks {3} failed too: {2}") || has(o, "outside excludeRanks {3} failed too: " + other))
        << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far from the timeout: " << o.error;
  }
}

// Shrink: the survivors of a dead rank revoke, then shrink it away, and
// go on in the new communicator: its rank and size, exact int32 sums on the
// board and on the slot rings. Bad lists are refused before anything is sent.
TEST_F(Shrink, SurvivorsShrinkTheDeadRankAwayAndGoOn) {
  auto outcomes = run_world(4, 60000, {2}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(size_t{1} << 16, 1.0f);
    for (int i = 0;; ++i) {
      if (rank == 2 && i == 3) raise(SIGKILL);
      if (rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess) break;
    }
    if (rrCommRevoke(comm) != rrSuccess) _exit(5);
    rrComm_t next = nullptr;
    const int own[] = {rank}, outside[] = {4}, twice[] = {2, 2};
    if (rrCommShrink(comm, own, 1, &next, nullptr) != rrInvalidArgument ||
        rrCommShrink(comm, outside, 1, &next, nullptr) != rrInvalidArgument ||
        rrCommShrink(comm, twice, 2, &next, nullptr) != rrInvalidArgument || rrCommShrink(comm, twice, -1, &next, nullptr) != rrInvalidArgument) {
      out->result = -3;
      note(out, "a bad list", rrInvalidArgument, comm);
      return;
    }
    const int dead[] = {2};
    const auto t0 = Clock::now();
    out->result = rrCommShrink(comm, dead, 1, &next, nullptr);
    out->seconds = seconds_since(t0);
    note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
    if (out->result != rrSuccess) return;
    int new_rank = -1, new_size = -1;
    (void)rrCommUserRank(next, &new_rank);
    (void)rrCommCount(next, &new_size);
    const int expected_rank = rank < 2 ? rank : rank - 1;
    bool right = new_rank == expected_rank && new_size == 3;
    // Sums on the board (16 elements) and the slot rings (2^20): old rank r
    // adds (r + 1) * (k % 7 + 1) at element k.
    for (size_t count : {size_t{16}, size_t{1} << 20}) {
      std::vector<int32_t> v(count);
      for (size_t k = 0; k < count; ++k) v[k] = (rank + 1) * static_cast<int32_t>(k % 7 + 1);
      const rrResult_t r = rrAllReduce(v.data(), v.data(), count, rrInt32, rrSum, next, nullptr);
      note(out, "allreduce on the new communicator", r, next);
      for (size_t k = 0; k < count && r == rrSuccess; ++k) right = right && v[k] == (1 + 2 + 4) * static_cast<int32_t>(k % 7 + 1);
      right = right && r == rrSuccess;
    }
    if (!right) out->result = -2;
    (void)rrCommDestroy(next);
    (void)rrCommDestroy(comm);
  });
  print(outcomes, {2});
  for (int r : {0, 1, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrSuccess) << "rank " << r << ": " << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far from the timeout: " << o.error;
  }
}

// Rank 0 excludes rank 2, ranks 1 and 2 exclude nobody, on 3 ranks with
// `timeout_ms`; each rank stays alive `stay` after its shrink.
std::vector<Outcome> shrink_with_different_lists(int timeout_ms, std::chrono::seconds stay) {
  return run_world(3, timeout_ms, {}, [stay](int rank, rrComm_t comm, Outcome* out) {
    if (rrBarrier(comm, nullptr) != rrSuccess) _exit(4);
    const int two[] = {2};
    rrComm_t next = nullptr;
    const auto t0 = Clock::now();
    out->result = rank == 0 ? rrCommShrink(comm, two, 1, &next, nullptr) : rrCommShrink(comm, nullptr, 0, &next, nullptr);
    out->seconds = seconds_since(t0);
    note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
    if (next) out->result = -2;
    std::this_thread::sleep_for(stay);
  });
}

TEST_F(Shrink, ASurvivorThatLeavesTheShrinkEndsTheOthersWaitsAtOnce) {
  // As below, but every rank stays alive for 4 s after its shrink: rank 2
  // waits for rank 0's offer, which never comes, and neither rank 0's exit
  // nor the 20 s timeout ends that wait; rank 1's word that it left does.
  const std::vector<Outcome> outcomes = shrink_with_different_lists(20000, std::chrono::seconds(4));
  print(outcomes);
  EXPECT_EQ(outcomes[0].result, rrInvalidUsage) << outcomes[0].error;
  EXPECT_EQ(outcomes[1].result, rrInvalidUsage) << outcomes[1].error;
  EXPECT_EQ(outcomes[2].result, rrRemoteError) << outcomes[2].error;
  EXPECT_TRUE(has(outcomes[2], "rank 1 left this shrink")) << outcomes[2].error;
  EXPECT_LT(outcomes[2].seconds, 3.0) << "before rank 0 exits, far from the timeout: " << outcomes[2].error;
}

TEST_F(Shrink, SurvivorsThatPassDifferentListsFailNamingBoth) {
  // Rank 0 and rank 1 exchange and refuse, naming both lists; rank 2 waits
  // for rank 0, which never sends to it, and fails naming it (rank 1 says
  // it left, or rank 0 is gone).
  const std::vector<Outcome> outcomes = shrink_with_different_lists(2000, std::chrono::seconds(0));
  print(outcomes);
  EXPECT_EQ(outcomes[0].result, rrInvalidUsage) << outcomes[0].error;
  EXPECT_TRUE(has(outcomes[0], "rank 1 excluded {}, rank 0 excluded {2}")) << outcomes[0].error;
  EXPECT_EQ(outcomes[1].result, rrInvalidUsage) << outcomes[1].error;
  EXPECT_TRUE(has(outcomes[1], "rank 0 excluded {2}, rank 1 excluded {}")) << outcomes[1].error;
  // Rank 1's word that it left, or rank 0 or rank 1 gone (each exits once
  // it failed), ends rank 2's wait, naming one of them.
  EXPECT_TRUE(outcomes[2].result == rrTimeout || outcomes[2].result == rrRemoteError) << outcomes[2].error;
  EXPECT_TRUE(has(outcomes[2], "rank 0") || has(outcomes[2], "rank 1")) << outcomes[2].error;
  EXPECT_LT(outcomes[2].seconds, 2.5) << outcomes[2].error;
}

}  // namespace
