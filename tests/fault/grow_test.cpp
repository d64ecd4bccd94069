// rrCommGetUniqueId and rrCommGrow (as NCCL 2.29's ncclCommGetUniqueId and
// ncclCommGrow) on forked ranks: rank 2 of 4 is killed; the survivors
// agree and shrink it away, make a unique id on the shrunk communicator and
// grow it back to 4 with a new process that joins by rrCommInitRank on
// that id; the next 100 collectives on the grown communicator are exact on
// all four (the survivors at their shrunk ranks, the new one last).
// Ranks that pass different sizes fail naming both; a size that does not
// grow is refused; a new rank that never comes fails every rrCommGrow
// within the timeout.

#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "shrink_world.hpp"
#include "world.hpp"

namespace {

using namespace fault_world;

// What the test's processes share: the id the survivors made, and the new
// rank's outcome.
struct Shared {
  std::atomic<int> id_ready{0};
  rrUniqueId id;
  Outcome newcomer;
  std::atomic<int> newcomer_done{0};
};

Shared* make_shared_page() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return new (p) Shared();
}

using Grow = NoShmLeft;

TEST_F(Grow, SurvivorsGrowBackToFourWithANewProcessAndGoOn) {
  Shared* shared = make_shared_page();
  // The new process: waits for the id, joins as rank 3 of 4, checks; its
  // values are those of "rank 4" (a rank the first world never had). It is
  // not this process's child (run_world checks that it leaves none): the
  // child that forks it exits at once.
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    if (fork() != 0) _exit(0);
    alarm(60);
    Outcome* out = &shared->newcomer;
    while (shared->id_ready.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    rrComm_t comm = nullptr;
    const auto t0 = Clock::now();
    out->result = rrCommInitRank(&comm, 4, shared->id, 3);
    out->seconds = seconds_since(t0);
    note(out, "init", static_cast<rrResult_t>(out->result), nullptr);
    if (out->result == rrSuccess && !check_after(comm, 4, {0, 1, 3, 4}, out)) out->result = -2;
    if (comm) (void)rrCommDestroy(comm);
    shared->newcomer_done.store(1);
    _exit(0);
  }
  ASSERT_EQ(waitpid(parent, nullptr, 0), parent);
  auto outcomes = run_world(4, 20000, {2}, [shared](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0;; ++i) {
      if (rank == 2 && i == 5) raise(SIGKILL);
      if (one_collective(comm, i, rank, 4) != rrSuccess) break;
    }
    (void)rrCommRevoke(comm);
    rrComm_t shrunk = nullptr;
    if (rrCommShrinkFailed(comm, &shrunk, nullptr, nullptr, nullptr) != rrSuccess) {
      note(out, "shrink", rrRemoteError, comm);
      return;
    }
    rrUniqueId id;
    out->result = rrCommGetUniqueId(shrunk, &id);
    note(out, "unique id", static_cast<rrResult_t>(out->result), shrunk);
    if (out->result != rrSuccess) return;
    if (rank == 0) {
      shared->id = id;
      shared->id_ready.store(1);
    }
    rrComm_t grown = nullptr;
    const auto t0 = Clock::now();
    out->result = rrCommGrow(shrunk, 4, id, &grown, nullptr);
    out->seconds = seconds_since(t0);
    note(out, "grow", static_cast<rrResult_t>(out->result), shrunk);
    if (out->result == rrSuccess && !check_after(grown, rank, {0, 1, 3, 4}, out)) out->result = -2;
    if (grown) (void)rrCommDestroy(grown);
    (void)rrCommDestroy(shrunk);
    (void)rrCommDestroy(comm);
  });
  const auto limit = Clock::now() + std::chrono::seconds(60);
  while (shared->newcomer_done.load() == 0 && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  print(outcomes, {2});
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << "rank " << r << ": " << outcomes[static_cast<size_t>(r)].error;
  }
  EXPECT_EQ(shared->newcomer.result, rrSuccess) << "the new rank: " << shared->newcomer.error;
  munmap(shared, sizeof(Shared));
}

TEST_F(Grow, RanksThatPassDifferentSizesFailNamingBothAndASizeThatDoesNotGrowIsRefused) {
  auto outcomes = run_world(3, 5000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    rrUniqueId id;
    if (rrCommGetUniqueId(comm, &id) != rrSuccess) _exit(4);
    rrComm_t grown = nullptr;
    if (rrCommGrow(comm, 3, id, &grown, nullptr) != rrInvalidArgument) {
      out->result = -3;
      return;
    }
    out->result = rrCommGrow(comm, rank == 0 ? 5 : 4, id, &grown, nullptr);
    note(out, "grow", static_cast<rrResult_t>(out->result), comm);
    if (grown) out->result = -2;
    // The communicator goes on.
    if (rrBarrier(comm, nullptr) != rrSuccess) out->result = -4;
  });
  print(outcomes);
  for (int r = 0; r < 3; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrInvalidUsage) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, r == 0 ? "rank 1 passed nranks 4, rank 0 passed 5" : "rank 0 passed nranks 5")) << o.error;
  }
}

TEST_F(Grow, ANewRankThatNeverComesFailsEveryGrowWithinTheTimeout) {
  auto outcomes = run_world(2, 1500, {}, [](int, rrComm_t comm, Outcome* out) {
    rrUniqueId id;
    if (rrCommGetUniqueId(comm, &id) != rrSuccess) _exit(4);
    rrComm_t grown = nullptr;
    const auto t0 = Clock::now();
    out->result = rrCommGrow(comm, 3, id, &grown, nullptr);
    out->seconds = seconds_since(t0);
    note(out, "grow", static_cast<rrResult_t>(out->result), comm);
    if (grown) out->result = -2;
  });
  print(outcomes);
  for (const Outcome& o : outcomes) {
    EXPECT_TRUE(o.result == rrTimeout || o.result == rrRemoteError) << o.error;
    EXPECT_LT(o.seconds, 4.0) << o.error;
  }
}

}  // namespace
