// rrCommRevoke (ULFM's MPI_Comm_revoke; rrCommShrink: shrink_test.cpp).
// A rank revokes while its peers
// wait for it in a call, on each path a call waits on (the one-shot board,
// the same-host slot rings, UCX's ring; with no argument check, so that
// they wait in the data path itself); their calls end with rrRevoked
// within the time a notice takes, far from the 60 s timeout, and every
// later call on any rank says rrRevoked at once. A call running on another
// thread of the revoking rank ends too. After a peer's death, each survivor
// revokes (the ULFM idiom) and all agree: rrRevoked.

#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "world.hpp"

namespace {

using namespace fault_world;

struct Path {
  const char* name;
  const char* algorithm;  // what rrCommGetAlgorithm must say for `count`
  size_t count;
  const char* same_host;  // RR_SAME_HOST
};
const Path kPaths[] = {
    {"board", "one-shot (shared memory)", 16, "shm"},
    {"slot rings", "ring (shared memory)", size_t{1} << 20, "shm"},
    {"UCX", "ring", size_t{1} << 20, "ucx"},
};

// The call under test on `path`: an allreduce of path.count floats.
rrResult_t allreduce(rrComm_t comm, const Path& path, std::vector<float>* data) {
  return rrAllReduce(data->data(), data->data(), path.count, rrFloat32, rrSum, comm, nullptr);
}

// Exits the rank (status 8) unless the call takes the path.
void require(rrComm_t comm, const Path& path) {
  const char* algorithm = nullptr;
  if (rrCommGetAlgorithm(comm, "allreduce", path.count, rrFloat32, &algorithm) != rrSuccess ||
      std::strcmp(algorithm, path.algorithm) != 0) {
    _exit(8);
  }
}

using Revoke = NoShmLeft;

TEST_F(Revoke, EndsThePeersWaitingCallsOnEveryPath) {
  for (const Path& path : kPaths) {
    SCOPED_TRACE(path.name);
    setenv("RR_SAME_HOST", path.same_host, 1);  // the forked ranks inherit it
    if (path.count > 16) setenv("RR_ALGO", "ring", 1);
    // No argument check to wait in: the peers wait in the data path itself.
    setenv("RR_CHECK_ARGUMENTS", "0", 1);
    // Rank 0 revokes while ranks 1 and 2 wait for it in their fourth call.
    auto outcomes = run_world(3, 60000, {}, [&](int rank, rrComm_t comm, Outcome* out) {
      require(comm, path);
      std::vector<float> data(path.count, 1.0f);
      for (int i = 0; i < 3; ++i) {
        if (allreduce(comm, path, &data) != rrSuccess) _exit(4);
      }
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const auto t0 = Clock::now();
        out->result = rrCommRevoke(comm);
        out->seconds = seconds_since(t0);
        note(out, "revoke", static_cast<rrResult_t>(out->result), comm);
      } else {
        const auto t0 = Clock::now();
        out->result = allreduce(comm, path, &data);
        out->seconds = seconds_since(t0) - 0.3;  // from the revocation on
        note(out, "waiting call", static_cast<rrResult_t>(out->result), comm);
      }
      // Every later call, on any rank: rrRevoked at once.
      const auto t1 = Clock::now();
      const rrResult_t later = allreduce(comm, path, &data);
      note(out, "later call", later, comm);
      rrResult_t async = rrSuccess;
      (void)rrCommGetAsyncError(comm, &async);
      if (later != rrRevoked || seconds_since(t1) > 0.1 || async != rrRevoked) out->result = -2;
    });
    unsetenv("RR_SAME_HOST");
    unsetenv("RR_ALGO");
    unsetenv("RR_CHECK_ARGUMENTS");
    print(outcomes);
    EXPECT_EQ(outcomes[0].result, rrSuccess) << outcomes[0].error;
    EXPECT_LT(outcomes[0].seconds, 0.5) << outcomes[0].error;
    for (int r : {1, 2}) {
      const Outcome& o = outcomes[static_cast<size_t>(r)];
      EXPECT_EQ(o.result, rrRevoked) << "rank " << r << ": " << o.error;
      EXPECT_TRUE(has(o, "revoked the communicator (rrCommRevoke)")) << o.error;
      EXPECT_LT(o.seconds, 1.0) << "the notice, not the 60 s timeout, ended it: " << o.error;
    }
  }
}

TEST_F(Revoke, EndsACallRunningOnAnotherThreadOfTheRevokingRank) {
  // Rank 1 never calls; rank 0's call waits for it on a thread of its own
  // while the main thread revokes. Rank 1, calling after, hears of it.
  auto outcomes = run_world(2, 60000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(size_t{1} << 20, 1.0f);
    if (rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      note(out, "call after the revocation", static_cast<rrResult_t>(out->result), comm);
      return;
    }
    std::atomic<int> running{-1};
    std::atomic<double> took{0};
    std::thread caller([&] {
      const auto t0 = Clock::now();
      running = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      took = seconds_since(t0);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const rrResult_t revoked = rrCommRevoke(comm);
    caller.join();
    note(out, "revoke", revoked, comm);
    note(out, "running call", static_cast<rrResult_t>(running.load()), comm);
    out->result = revoked == rrSuccess ? running.load() : -2;
    out->seconds = took - 0.3;
  });
  print(outcomes);
  EXPECT_EQ(outcomes[0].result, rrRevoked) << outcomes[0].error;
  EXPECT_LT(outcomes[0].seconds, 0.5) << outcomes[0].error;
  EXPECT_TRUE(has(outcomes[0], "the communicator was revoked (rrCommRevoke on rank 0)")) << outcomes[0].error;
  EXPECT_EQ(outcomes[1].result, rrRevoked) << outcomes[1].error;
  EXPECT_TRUE(has(outcomes[1], "rank 0")) << outcomes[1].error;
}

TEST_F(Revoke, SurvivorsOfADeadPeerRevokeAndAgree) {
  // Rank 2 dies mid-calls; ranks 0 and 1 fail naming it, each revokes (the
  // ULFM idiom), and every later call of either says rrRevoked.
  auto outcomes = run_world(3, 60000, {2}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(size_t{1} << 18, 1.0f);
    for (int i = 0;; ++i) {
      if (rank == 2 && i == 5) raise(SIGKILL);
      const rrResult_t r = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      if (r != rrSuccess) {
        note(out, "failed call", r, comm);
        break;
      }
    }
    const rrResult_t revoked = rrCommRevoke(comm);
    note(out, "revoke", revoked, comm);
    const rrResult_t later = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
    note(out, "later call", later, comm);
    out->result = revoked == rrSuccess ? later : -2;
  });
  print(outcomes, {2});
  for (int r : {0, 1}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRevoked) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 2")) << o.error;
  }
}

}  // namespace
