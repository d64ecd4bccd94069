// Faults on the one-shot schedules' same-host board (lib/comm/one_shot.cpp,
// lib/exec/board_executor.hpp): a peer killed or stopped while small
// allreduces run on the board, an abort of a call waiting there, every rank
// killed at once, and ranks whose calls take the board against ranks whose
// calls take UCX. Each test first checks that the calls do take the board,
// so that a fallback to UCX cannot pass for it; the fixture checks that
// nothing is left in /dev/shm.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "free_port.hpp"
#include "world.hpp"

namespace {

using namespace fault_world;

constexpr size_t kElements = 16;  // 64 bytes: one publication

// Exits the rank (status 8) unless a small allreduce takes the board.
void require_board(rrComm_t comm) {
  const char* algorithm = nullptr;
  if (rrCommGetAlgorithm(comm, "allreduce", kElements, rrFloat32, &algorithm) != rrSuccess ||
      std::strcmp(algorithm, "one-shot (shared memory)") != 0) {
    _exit(8);
  }
}

// Small allreduces until one fails (a strike ends them); records that call.
// After rrCommAbort the communicator is gone: the calling thread's last
// error says why.
void allreduce_until_failure(rrComm_t comm, Outcome* out, bool aborted = false) {
  std::vector<float> data(kElements, 1.0f);
  for (int i = 0; i < 100000000; ++i) {
    const auto t0 = Clock::now();
    out->result = rrAllReduce(data.data(), data.data(), kElements, rrFloat32, rrMax, comm, nullptr);
    out->seconds = seconds_since(t0);  // of the call that failed: its deadline counts from its start
    if (out->result != rrSuccess) break;
  }
  std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(aborted ? nullptr : comm));
}

// Allreduces until one fails; the victim raises `signal` `delay` into them.
Body strike(int victim, int signal, std::chrono::milliseconds delay) {
  return [=](int rank, rrComm_t comm, Outcome* out) {
    require_board(comm);
    if (rank == victim) {
      std::thread([=] {
        std::this_thread::sleep_for(delay);
        raise(signal);
      }).detach();
    }
    allreduce_until_failure(comm, out);
  };
}

using OneShot = NoShmLeft;

TEST_F(OneShot, KilledPeerIsNamedByTheSurvivors) {
  // 3 ranks: rank 1 dies between two publications; the others wait for its
  // next one, or for it to be done with the last (or hear the notice).
  auto outcomes = run_world(3, 60000, {1}, strike(1, SIGKILL, std::chrono::milliseconds(50)));
  print(outcomes, {1});
  bool seen_on_board = false;
  for (int r : {0, 2}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 1")) << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far sooner than the 60 s timeout: " << o.error;
    seen_on_board |= has(o, "shared-memory board");
  }
  EXPECT_TRUE(seen_on_board) << "a survivor saw the death on the board itself";
}

TEST_F(OneShot, StoppedPeerBecomesATimeout) {
  const int timeout_ms = 1500;
  auto outcomes = run_world(2, timeout_ms, {1}, strike(1, SIGSTOP, std::chrono::milliseconds(50)));
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  EXPECT_TRUE(has(o, "rank 1") && has(o, "shared-memory board")) << o.error;
  EXPECT_LT(o.seconds, timeout_ms / 1000.0 + 0.5) << o.error;
}

TEST_F(OneShot, AbortEndsACallWaitingOnTheBoard) {
  // Rank 1 stops for good; rank 0's allreduce then waits on the board until
  // another thread aborts the communicator.
  auto outcomes = run_world(2, 60000, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    require_board(comm);
    if (rank == 1) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        raise(SIGSTOP);
      }).detach();
    } else {
      std::thread([comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        rrCommAbort(comm);
      }).detach();
    }
    allreduce_until_failure(comm, out, true);
  });
  print(outcomes, {1});
  EXPECT_EQ(outcomes[0].result, rrInvalidUsage) << outcomes[0].error;
  EXPECT_TRUE(has(outcomes[0], "aborted")) << outcomes[0].error;
  EXPECT_LT(outcomes[0].seconds, 5.0) << "the abort ended the wait, not the 60 s timeout";
}

TEST_F(OneShot, EveryRankKilledLeavesNoSegment) {
  // SIGKILL of every rank in the middle of small allreduces: nobody cleans
  // up, and nobody needs to (the board is anonymous memory). The fixture
  // compares /dev/shm before and after.
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  const int n = 3;
  std::vector<pid_t> ranks;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(60);  // a rank that never got to its strike still ends
      rrComm_t comm = nullptr;
      if (rrCommInitUrl(&comm, url.c_str(), n, r, nullptr) != rrSuccess) _exit(3);
      require_board(comm);
      std::vector<float> data(kElements, 1.0f);
      if (rrAllReduce(data.data(), data.data(), kElements, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
      std::thread([r] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + 5 * r));
        raise(SIGKILL);
      }).detach();
      for (;;) (void)rrAllReduce(data.data(), data.data(), kElements, rrFloat32, rrSum, comm, nullptr);
    }
    ranks.push_back(pid);
  }
  for (pid_t pid : ranks) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "a rank ended otherwise than by its own SIGKILL (status " << status << ")";
  }
}

// Every rank runs `good` except `odd`, which runs `bad`; each must fail with
// rrInvalidUsage naming both calls, well before the timeout.
void expect_mismatch(int n, int odd, rrResult_t (*good)(rrComm_t, float*), rrResult_t (*bad)(rrComm_t, float*),
                     const std::string& good_text, const std::string& bad_text) {
  auto outcomes = run_world(n, 20000, {}, [&](int rank, rrComm_t comm, Outcome* out) {
    require_board(comm);
    std::vector<float> data(size_t{1} << 20, 1.0f);
    // A few matching calls first: the board's buffers have turned over.
    for (int i = 0; i < 5; ++i) {
      if (rrAllReduce(data.data(), data.data(), kElements, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(5);
    }
    const auto t0 = Clock::now();
    out->result = rank == odd ? bad(comm, data.data()) : good(comm, data.data());
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes);
  for (int r = 0; r < n; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrInvalidUsage) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, good_text) && has(o, bad_text)) << "rank " << r << ": " << o.error;
    EXPECT_LT(o.seconds, 10.0) << "not a timeout: " << o.error;
  }
}

rrResult_t small_allreduce(rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrSum, c, nullptr); }

TEST_F(OneShot, ARankOnTheRingIsToldApart) {
  // 1000 floats take the board, 2^20 the slot rings, whose argument check
  // announces the call on the board: the ranks waiting there read it.
  expect_mismatch(
      3, 1, small_allreduce,
      [](rrComm_t c, float* d) { return rrAllReduce(d, d, size_t{1} << 20, rrFloat32, rrSum, c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "allreduce #5 (count=1048576, dtype=float32, op=sum)");
}

TEST_F(OneShot, ARankInABroadcastTreeIsToldApart) {
  expect_mismatch(
      4, 2, small_allreduce, [](rrComm_t c, float* d) { return rrBroadcast(d, d, 1000, rrFloat32, 0, c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "broadcast #5 (count=1000, dtype=float32, root=0)");
}

TEST_F(OneShot, BarrierAgainstAllreduceIsToldApart) {
  expect_mismatch(
      3, 0, small_allreduce, [](rrComm_t c, float*) { return rrBarrier(c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "barrier #5");
}

}  // namespace
