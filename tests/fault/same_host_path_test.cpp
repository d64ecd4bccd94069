// Faults on the same-host data path (the ring over shared-memory slot rings,
// lib/exec/shm_ring_executor.hpp): a peer killed or stopped while the ring
// runs on the slots, an abort of a call waiting on them, and every rank
// killed at once. Each test first checks that the ring did take the slots,
// so that a fallback to UCX cannot pass for them; the fixture checks that
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

constexpr size_t kElements = size_t{16} << 20;  // 64 MiB of float32: many slots in flight

// Exits the rank (status 8) unless a 64 MiB allreduce takes the slot rings.
void require_same_host_path(rrComm_t comm) {
  const char* algorithm = nullptr;
  if (rrCommGetAlgorithm(comm, "allreduce", kElements, rrFloat32, &algorithm) != rrSuccess ||
      std::strcmp(algorithm, "ring (shared memory)") != 0) {
    _exit(8);
  }
}

// The rank's buffer (each rank is a process of its own), written once.
std::vector<float>& large_data() {
  static std::vector<float> data(kElements, 1.0f);
  return data;
}

rrResult_t large_sum(rrComm_t comm) {
  std::vector<float>& data = large_data();
  return rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
}

// The path, and the buffer made before any strike's clock starts (writing
// 64 MiB takes longer than the strikes' delays).
void require_path_and_buffer(rrComm_t comm) {
  require_same_host_path(comm);
  (void)large_data();
}

// Allreduces until one fails; the victim raises `signal` `delay` into them.
Body strike_mid_ring(int victim, int signal, std::chrono::milliseconds delay) {
  return strike(victim, signal, delay, require_path_and_buffer, large_sum);
}

using SameHostPath = NoShmLeft;

TEST_F(SameHostPath, KilledPeerIsNamedByTheSurvivors) {
  // 3 ranks: rank 1 dies while chunks sit in its slots. Rank 2 waits on its
  // ring from rank 1, rank 0 on rank 1 taking its chunks (or on the notice).
  auto outcomes = run_world(3, 60000, {1}, strike_mid_ring(1, SIGKILL, std::chrono::milliseconds(30)));
  print(outcomes, {1});
  for (int r : {0, 2}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 1")) << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far sooner than the 60 s timeout: " << o.error;
  }
  // Rank 2 reads from rank 1's slots, or from its cell of the board when
  // the kill lands in a call's argument check (a loaded machine's
  // allreduces are slow to start): it sees the death itself.
  EXPECT_TRUE(has(outcomes[2], "same-host shared memory") || has(outcomes[2], "same-host shared-memory board"))
      << outcomes[2].error;
}

TEST_F(SameHostPath, StoppedPeerBecomesATimeout) {
  expect_stopped_peer_times_out(require_path_and_buffer, large_sum, std::chrono::milliseconds(30),
                                "same-host shared memory");
}

TEST_F(SameHostPath, AbortEndsACallWaitingOnTheSlots) {
  // Rank 1 stops for good in the middle of a ring (a call lasts
  // milliseconds, its argument check microseconds); rank 0's allreduce
  // then waits on the slots until another thread aborts the communicator.
  expect_abort_ends_the_wait(require_path_and_buffer, large_sum, std::chrono::milliseconds(30));
}

TEST_F(SameHostPath, EveryRankKilledLeavesNoSegment) {
  // SIGKILL of every rank in the middle of the ring: the rings are
  // anonymous memory. The fixture compares /dev/shm before and after.
  kill_every_rank_mid_calls(3, require_path_and_buffer, large_sum);
}

}  // namespace
