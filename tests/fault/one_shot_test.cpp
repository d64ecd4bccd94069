// Faults on the one-shot schedules' same-host board (lib/coll/one_shot.hpp,
// lib/exec/board_executor.hpp): a peer killed or stopped while small
// allreduces run on the board, an abort of a call waiting there, every rank
// killed at once, and ranks whose calls take the board against ranks whose
// calls take UCX. Each test first checks that the calls do take the board,
// so that a fallback to UCX cannot pass for it; the fixture checks that
// nothing is left in /dev/shm.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

rrResult_t small_max(rrComm_t comm) {
  float data[kElements] = {};
  return rrAllReduce(data, data, kElements, rrFloat32, rrMax, comm, nullptr);
}

// Small allreduces until one fails; the victim raises `signal` `delay` into them.
Body strike_small(int victim, int signal, std::chrono::milliseconds delay) {
  return strike(victim, signal, delay, require_board, small_max);
}

using OneShot = NoShmLeft;

TEST_F(OneShot, KilledPeerIsNamedByTheSurvivors) {
  // 3 ranks: rank 1 dies between two publications; the others wait for its
  // next one, or for it to be done with the last (or hear the notice).
  auto outcomes = run_world(3, 60000, {1}, strike_small(1, SIGKILL, std::chrono::milliseconds(50)));
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
  expect_stopped_peer_times_out(require_board, small_max, std::chrono::milliseconds(50), "shared-memory board");
}

TEST_F(OneShot, AbortEndsACallWaitingOnTheBoard) {
  // Rank 1 stops for good; rank 0's allreduce then waits on the board until
  // another thread aborts the communicator.
  expect_abort_ends_the_wait(require_board, small_max, std::chrono::milliseconds(50));
}

TEST_F(OneShot, EveryRankKilledLeavesNoSegment) {
  // SIGKILL of every rank in the middle of small allreduces: the board is
  // anonymous memory. The fixture compares /dev/shm before and after.
  kill_every_rank_mid_calls(3, require_board, small_max);
}

// Every rank runs `good` except `odd`, which runs `bad`, after five matching
// calls (the board's buffers have turned over).
void expect_mismatch_after_warmup(int n, int odd, const std::function<rrResult_t(rrComm_t, float*)>& good,
                                  const std::function<rrResult_t(rrComm_t, float*)>& bad, const std::string& good_text,
                                  const std::string& bad_text) {
  expect_mismatch(n, odd, on_floats(good), on_floats(bad), good_text, bad_text, [](rrComm_t comm) {
    require_board(comm);
    return small_max(comm);
  }, 5);
}

rrResult_t small_allreduce(rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrSum, c, nullptr); }

TEST_F(OneShot, ARankOnTheRingIsToldApart) {
  // 1000 floats take the board, 2^20 the slot rings, whose argument check
  // announces the call on the board: the ranks waiting there read it (with
  // the ring's cut: a slot a chunk, whose size depends on the cores).
  expect_mismatch_after_warmup(
      3, 1, small_allreduce,
      [](rrComm_t c, float* d) { return rrAllReduce(d, d, size_t{1} << 20, rrFloat32, rrSum, c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "allreduce #5 (count=1048576, dtype=float32, op=sum, chunks of ");
}

TEST_F(OneShot, ARankInABroadcastTreeIsToldApart) {
  expect_mismatch_after_warmup(
      4, 2, small_allreduce, [](rrComm_t c, float* d) { return rrBroadcast(d, d, 1000, rrFloat32, 0, c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "broadcast #5 (count=1000, dtype=float32, root=0)");
}

TEST_F(OneShot, BarrierAgainstAllreduceIsToldApart) {
  expect_mismatch_after_warmup(
      3, 0, small_allreduce, [](rrComm_t c, float*) { return rrBarrier(c, nullptr); },
      "allreduce #5 (count=1000, dtype=float32, op=sum)", "barrier #5");
}

}  // namespace
