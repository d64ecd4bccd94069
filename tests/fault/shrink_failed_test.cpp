// rrCommShrinkFailed (ULFM's MPI_Comm_shrink: no list; the survivors agree
// which ranks failed) on forked ranks: at 2 to 8 ranks each rank in turn is
// SIGKILLed at a random moment of a loop of every collective; every
// survivor agrees on that rank alone, and the next 100 collectives on the
// new communicator are exact against a reference; the same over UCX's TCP
// lanes alone (as between hosts). Two ranks killed at once; a rank killed
// as the agreement starts (counted, never waited for); a rank stopped
// (SIGSTOP) for less than the timeout is waited for, not excluded; a rank
// that never calls is excluded once the timeout passed, and named; with no
// failure the survivors agree on nobody. rrCommAgreeFailed's list, passed
// to rrCommShrink, makes the same communicator.

#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shrink_world.hpp"
#include "world.hpp"

namespace {

using namespace fault_world;

std::string list_text(const int* ranks, int n) {
  std::string text = "{";
  for (int i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "}";
}

// The survivors' call: shrinks, checks that the agreed list is `expected`
// (or `or_else`), then the 100 collectives after. With `settle`, the shrink
// races a kill of this rank: whichever sets it first wins (the kill, and
// this rank waits for it, or the shrink, and the kill is called off).
void shrink_and_check(rrComm_t comm, int rank, int n, const std::set<int>& expected, Outcome* out,
                      std::atomic<bool>* settle = nullptr, const std::optional<std::set<int>>& or_else = {}) {
  rrComm_t next = nullptr;
  std::vector<int> excluded(static_cast<size_t>(n), -1);
  int count = -1;
  const auto t0 = Clock::now();
  out->result = rrCommShrinkFailed(comm, &next, excluded.data(), &count, nullptr);
  out->seconds = seconds_since(t0);
  if (settle && settle->exchange(true)) {
    for (;;) pause();  // killed by now, or about to be
  }
  if (out->result != rrSuccess) {
    note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
    return;
  }
  out->agreed = count;
  std::vector<int> want(expected.begin(), expected.end());
  const std::vector<int> got(excluded.begin(), excluded.begin() + count);
  if (or_else && got == std::vector<int>(or_else->begin(), or_else->end())) want = got;
  if (got != want) {
    std::snprintf(out->error, sizeof(out->error), "agreed on %s, expected %s", list_text(excluded.data(), count).c_str(),
                  list_text(want.data(), static_cast<int>(want.size())).c_str());
    out->result = -3;
    return;
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (!std::count(want.begin(), want.end(), r)) survivors.push_back(r);
  }
  if (!check_after(next, rank, survivors, out)) out->result = -2;
  (void)rrCommDestroy(next);
  (void)rrCommDestroy(comm);
}

// `n` ranks loop over every collective; each rank in `victims` SIGKILLs
// itself at loop step `kill_at`; the survivors revoke and shrink.
std::vector<Outcome> kill_and_shrink(int n, const std::set<int>& victims, int kill_at) {
  return run_world(n, 20000, victims, [&](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (victims.count(rank) && i == kill_at) raise(SIGKILL);
      if (one_collective(comm, i, rank, n) != rrSuccess) break;
      if (i > kill_at + 1000) {
        std::snprintf(out->error, sizeof(out->error), "no call failed");
        return;
      }
    }
    if (rrCommRevoke(comm) != rrSuccess) _exit(5);
    shrink_and_check(comm, rank, n, victims, out);
  });
}

void expect_survivors_agree(const std::vector<Outcome>& outcomes, const std::set<int>& victims, double within) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (victims.count(static_cast<int>(r))) continue;
    EXPECT_EQ(outcomes[r].result, rrSuccess) << "rank " << r << ": " << outcomes[r].error;
    EXPECT_LT(outcomes[r].seconds, within) << "rank " << r << ": " << outcomes[r].error;
  }
}

using ShrinkFailed = NoShmLeft;

TEST_F(ShrinkFailed, EveryRankInTurnKilledAtARandomMomentIsAgreedAndShrunkAway) {
  every_rank_in_turn(2, 8, 4242, [](int n, int victim, int kill_at) {
    expect_survivors_agree(kill_and_shrink(n, {victim}, kill_at), {victim}, 10.0);
  });
}

TEST_F(ShrinkFailed, OverUcxTcpEveryRankInTurnIsAgreedAndShrunkAway) {
  setenv("RR_SAME_HOST", "ucx", 1);  // the forked ranks inherit both
  setenv("UCX_TLS", "tcp,self", 1);
  for (int n : {3, 5}) {
    for (int victim = 0; victim < n; ++victim) {
      SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(victim) + " killed");
      expect_survivors_agree(kill_and_shrink(n, {victim}, 3 + victim), {victim}, 10.0);
    }
  }
  unsetenv("RR_SAME_HOST");
  unsetenv("UCX_TLS");
}

TEST_F(ShrinkFailed, TwoRanksKilledAtOnceAreAgreedAndShrunkAway) {
  const std::vector<Outcome> outcomes = kill_and_shrink(7, {0, 4}, 9);
  print(outcomes, {0, 4});
  expect_survivors_agree(outcomes, {0, 4}, 10.0);
}

TEST_F(ShrinkFailed, ARankKilledAsTheAgreementStartsIsCountedNeverWaitedFor) {
  // Rank 3 dies in the loop; rank 1 dies after it revoked, as the others
  // enter the agreement (some have sent it their first round, some not):
  // the survivors agree on {1, 3} far sooner than the 20 s timeout.
  const int n = 5;
  auto outcomes = run_world(n, 20000, {1, 3}, [](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (rank == 3 && i == 4) raise(SIGKILL);
      if (one_collective(comm, i, rank, n) != rrSuccess) break;
    }
    (void)rrCommRevoke(comm);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      raise(SIGKILL);
    }
    shrink_and_check(comm, rank, n, {1, 3}, out);
  });
  print(outcomes, {1, 3});
  expect_survivors_agree(outcomes, {1, 3}, 10.0);
}

TEST_F(ShrinkFailed, ARankKilledDuringTheAgreementIsCountedAndTheOthersGoOn) {
  // Rank 4 dies in the loop; rank 2 calls the shrink too and dies 0-5 ms
  // into it (before, during or after its part of the agreement): the
  // others agree on {2, 4}, at once or after one more agreement (when the
  // first decided before rank 2 died, the shrink's exchange finds it gone).
  // On a loaded machine the kill may come only after rank 2's whole shrink
  // (its thread starved): then the kill is called off, every rank agreed
  // on {4}, and rank 2 takes part in the collectives after. At least one
  // of the six cases must have killed it in time.
  const int n = 5;
  int killed_in_time = 0;
  for (int delay_us : {0, 300, 700, 1500, 3000, 5000}) {
    SCOPED_TRACE("rank 2 killed " + std::to_string(delay_us) + " us into the shrink");
    auto outcomes = run_world(n, 20000, {2, 4}, [delay_us](int rank, rrComm_t comm, Outcome* out) {
      for (int i = 0;; ++i) {
        if (rank == 4 && i == 5) raise(SIGKILL);
        if (one_collective(comm, i, rank, n) != rrSuccess) break;
      }
      (void)rrCommRevoke(comm);
      if (rank == 2) {
        static std::atomic<bool> settled{false};
        std::thread([delay_us] {
          std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
          if (!settled.exchange(true)) raise(SIGKILL);
        }).detach();
        shrink_and_check(comm, rank, n, {4}, out, &settled);
        return;
      }
      shrink_and_check(comm, rank, n, {2, 4}, out, nullptr, std::set<int>{4});
    });
    print(outcomes, {2, 4});
    expect_survivors_agree(outcomes, {2, 4}, 10.0);
    killed_in_time += outcomes[0].agreed == 2;
  }
  EXPECT_GE(killed_in_time, 1) << "no case killed rank 2 before its shrink ended: nothing was tested";
}

TEST_F(ShrinkFailed, ARankStoppedForLessThanTheTimeoutIsWaitedForNotExcluded) {
  // Rank 2 dies; rank 0 stops rank 1 (SIGSTOP) for 1 s of the 6 s timeout
  // just as the survivors shrink: rank 1 is waited for and stays (the
  // margin is wide, so that a loaded machine does not make it silent).
  const int n = 4;
  auto outcomes = run_world(n, 6000, {2}, [](int rank, rrComm_t comm, Outcome* out) {
    int32_t pid = static_cast<int32_t>(getpid());
    std::vector<int32_t> pids(n);
    if (rrAllGather(&pid, pids.data(), 1, rrInt32, comm, nullptr) != rrSuccess) _exit(4);
    for (int i = 0;; ++i) {
      if (rank == 2 && i == 3) raise(SIGKILL);
      if (one_collective(comm, i, rank, n) != rrSuccess) break;
    }
    (void)rrCommRevoke(comm);
    if (rank == 0) {
      kill(pids[1], SIGSTOP);
      std::thread([target = pids[1]] {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        kill(target, SIGCONT);
      }).detach();
    }
    shrink_and_check(comm, rank, n, {2}, out);
  });
  print(outcomes, {2});
  expect_survivors_agree(outcomes, {2}, 5.9);
}

TEST_F(ShrinkFailed, ARankThatNeverCallsIsExcludedAfterTheTimeoutAndNamed) {
  // Rank 1 is alive but never calls (it sleeps past the 1.5 s timeout):
  // the others exclude it once the timeout passed, and go on.
  const int n = 4;
  auto outcomes = run_world(n, 1500, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rrBarrier(comm, nullptr) != rrSuccess) _exit(4);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      _exit(0);
    }
    shrink_and_check(comm, rank, n, {1}, out);
  });
  print(outcomes, {1});
  for (int r : {0, 2, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrSuccess) << "rank " << r << ": " << o.error;
    EXPECT_GT(o.seconds, 1.4) << "rank 1 was waited for the timeout";
    EXPECT_LT(o.seconds, 4.0) << o.error;
  }
}

TEST_F(ShrinkFailed, WithNoFailureTheSurvivorsAgreeOnNobody) {
  for (int n : {1, 2, 3}) {
    auto outcomes = run_world(n, 5000, {}, [n](int rank, rrComm_t comm, Outcome* out) {
      if (rrBarrier(comm, nullptr) != rrSuccess) _exit(4);
      shrink_and_check(comm, rank, n, {}, out);
    });
    expect_survivors_agree(outcomes, {}, 5.0);
  }
}

TEST_F(ShrinkFailed, TheAgreementAloneGivesTheListThatRrCommShrinkTakes) {
  // rrCommAgreeFailed, then rrCommShrink with its list: what torch's
  // shrink_group does through the backend.
  const int n = 4;
  auto outcomes = run_world(n, 20000, {0}, [](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (rank == 0 && i == 7) raise(SIGKILL);
      if (one_collective(comm, i, rank, n) != rrSuccess) break;
    }
    (void)rrCommRevoke(comm);
    std::vector<int> failed(n, -1);
    int count = -1;
    out->result = rrCommAgreeFailed(comm, failed.data(), &count);
    note(out, "agree", static_cast<rrResult_t>(out->result), comm);
    if (out->result != rrSuccess) return;
    if (count != 1 || failed[0] != 0) {
      std::snprintf(out->error, sizeof(out->error), "agreed on %s", list_text(failed.data(), count).c_str());
      out->result = -3;
      return;
    }
    rrComm_t next = nullptr;
    out->result = rrCommShrink(comm, failed.data(), count, &next, nullptr);
    note(out, "shrink", static_cast<rrResult_t>(out->result), comm);
    if (out->result == rrSuccess && !check_after(next, rank, {1, 2, 3}, out)) out->result = -2;
    if (next) (void)rrCommDestroy(next);
    (void)rrCommDestroy(comm);
  });
  expect_survivors_agree(outcomes, {0}, 10.0);
}

TEST_F(ShrinkFailed, RefusesMissingArguments) {
  auto outcomes = run_world(1, 5000, {}, [](int, rrComm_t comm, Outcome* out) {
    out->result = rrCommShrinkFailed(comm, nullptr, nullptr, nullptr, nullptr);
    note(out, "no newcomm", static_cast<rrResult_t>(out->result), comm);
    if (rrCommShrinkFailed(nullptr, nullptr, nullptr, nullptr, nullptr) != rrInvalidArgument) out->result = -4;
    if (rrCommAgreeFailed(comm, nullptr, nullptr) != rrInvalidArgument) out->result = -5;
    if (rrCommAgreeFailed(nullptr, nullptr, nullptr) != rrInvalidArgument) out->result = -6;
  });
  EXPECT_EQ(outcomes[0].result, rrInvalidArgument) << outcomes[0].error;
  EXPECT_TRUE(has(outcomes[0], "newcomm is NULL")) << outcomes[0].error;
}

}  // namespace
