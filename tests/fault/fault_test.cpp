// Fault injection with real processes: ranks are forked children (the parent
// only watches) that die, stop, disagree on a call or abort. Each test checks
// the error every survivor reports and names, how long it took, and that
// nothing is left behind: no child process, no new shared-memory segment.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "free_port.hpp"
#include "world.hpp"

namespace {

using namespace fault_world;

// A large allreduce; the victim faults `delay` into it, from a second thread.
Body fault_mid_allreduce(int victim, int signal, std::chrono::milliseconds delay) {
  return [=](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(size_t{16} << 20, 1.0f);  // 64 MiB: many chunks in flight when the fault hits
    if (rrAllReduce(data.data(), data.data(), 1024, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
    if (rank == victim) {
      std::thread([=] {
        std::this_thread::sleep_for(delay);
        raise(signal);
      }).detach();
    }
    for (int i = 0; i < 1000; ++i) {  // until the fault stops it
      const auto t0 = Clock::now();
      out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      out->seconds = seconds_since(t0);  // of the call that failed: its deadline counts from its start
      if (out->result != rrSuccess) break;
    }
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
    rrResult_t async = rrSuccess;
    rrCommGetAsyncError(comm, &async);
    out->async_error = async;
    // A later call on the failed communicator is refused, not hung.
    float x = 1;
    if (rrAllReduce(&x, &x, 1, rrFloat32, rrSum, comm, nullptr) == rrSuccess) _exit(6);
  };
}

using Faults = NoShmLeft;

TEST_F(Faults, KilledRankIsNamedByEverySurvivor) {
  // 4 ranks: rank 2 dies mid-transfer; ranks 1 and 3 are its neighbours,
  // rank 0 is not and hears of it by notice.
  auto outcomes = run_world(4, 60000, {2}, fault_mid_allreduce(2, SIGKILL, std::chrono::milliseconds(20)));
  print(outcomes, {2});
  for (int r : {0, 1, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 2 failed") || has(o, "from rank 2") || has(o, "rank 2 to take")) << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far sooner than the 60 s timeout: " << o.error;
    EXPECT_EQ(o.async_error, rrRemoteError);
  }
  EXPECT_TRUE(has(outcomes[0], "reported")) << "rank 0 is no neighbour of rank 2: " << outcomes[0].error;
}

// A rank killed while it holds a shared-memory segment it has not unlinked
// yet (UCX's window between creating and unlinking one): the survivors
// remove it once they see the death, and leave alone one a live process holds.
TEST_F(Faults, SegmentOfAKilledRankIsRemovedBySurvivors) {
  // A System V segment whose creator died before it attached it.
  int made[2];
  ASSERT_EQ(pipe(made), 0);
  if (fork() == 0) {
    const int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    if (write(made[1], &id, sizeof(id)) != sizeof(id)) _exit(1);
    _exit(0);
  }
  ASSERT_EQ(read(made[0], &sysv_orphan_, sizeof(sysv_orphan_)), static_cast<ssize_t>(sizeof(sysv_orphan_)));
  close(made[0]);
  close(made[1]);
  while (wait(nullptr) > 0) {
  }
  ASSERT_GE(sysv_orphan_, 0);
  const std::string orphan = "/ucx_shm_posix_rrtest" + std::to_string(getpid());
  const std::string held = "/ucx_shm_posix_rrheld" + std::to_string(getpid());
  const int keep = shm_open(held.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(keep, 0);
  const Body inner = fault_mid_allreduce(2, SIGKILL, std::chrono::milliseconds(20));
  auto outcomes = run_world(4, 60000, {2}, [&](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 2 && shm_open(orphan.c_str(), O_CREAT | O_RDWR, 0600) < 0) _exit(4);  // open until it dies
    inner(rank, comm, out);
  });
  print(outcomes, {2});
  for (int r : {0, 1, 3}) EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrRemoteError);
  EXPECT_NE(access(("/dev/shm" + orphan).c_str(), F_OK), 0) << "the killed rank's segment is left: " << orphan;
  // UCX's System V transport too: a segment made by a process that died
  // before it attached it (nattch 0, not marked for removal).
  struct shmid_ds ds {};
  EXPECT_NE(shmctl(sysv_orphan_, IPC_STAT, &ds), 0) << "the dead process's System V segment " << sysv_orphan_ << " is left";
  EXPECT_EQ(access(("/dev/shm" + held).c_str(), F_OK), 0) << "a segment a live process holds was removed";
  close(keep);
  shm_unlink(held.c_str());
  shm_unlink(orphan.c_str());
  shmctl(sysv_orphan_, IPC_RMID, nullptr);
}

// A setup that fails (here: rank 1 never comes) may be a rank killed while
// it made its transport: the segments such a rank leaves are removed.
TEST_F(Faults, FailedSetupRemovesWhatADeadRankLeft) {
  const std::string orphan = "/ucx_shm_posix_rrinit" + std::to_string(getpid());
  if (fork() == 0) {  // opens it and dies holding it
    if (shm_open(orphan.c_str(), O_CREAT | O_RDWR, 0600) < 0) _exit(1);
    _exit(0);
  }
  while (wait(nullptr) > 0) {
  }
  ASSERT_EQ(access(("/dev/shm" + orphan).c_str(), F_OK), 0);
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.timeout_ms = 500;
  rrComm_t comm = nullptr;
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  EXPECT_EQ(rrCommInitUrl(&comm, url.c_str(), 2, 0, &config), rrTimeout) << rrGetLastError(nullptr);
  EXPECT_NE(access(("/dev/shm" + orphan).c_str(), F_OK), 0) << "left: " << orphan;
  shm_unlink(orphan.c_str());
}

TEST_F(Faults, StoppedRankBecomesATimeoutOnEverySurvivor) {
  // SIGSTOP: a hang. Its neighbours time out naming it; rank 0 hears from them.
  const int timeout_ms = 1500;
  auto outcomes = run_world(4, timeout_ms, {2}, fault_mid_allreduce(2, SIGSTOP, std::chrono::milliseconds(20)));
  print(outcomes, {2});
  int timeouts = 0;
  for (int r : {0, 1, 3}) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_TRUE(o.result == rrTimeout || o.result == rrRemoteError) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 2")) << o.error;
    // Its own deadline, or a neighbour's notice sent at that neighbour's
    // deadline: either way within half a second of RR_TIMEOUT_MS (the drain,
    // the notice and the wait for the others' notices are bounded to fit).
    EXPECT_LT(o.seconds, timeout_ms / 1000.0 + 0.5) << o.error;
    timeouts += o.result == rrTimeout ? 1 : 0;
  }
  EXPECT_GE(timeouts, 1) << "a neighbour of the stopped rank times out";
}


TEST_F(Faults, AbortReturnsQuicklyAndEndsCallsOnOtherThreads) {
  // Rank 2 stops for good. Rank 0 has a blocking allreduce on one thread, an
  // async one queued, and a receive polled by a third; another thread aborts. The abort returns within
  // 1 s, both calls return "aborted", and rank 1 hears of it from rank 0.
  auto outcomes = run_world(3, 60000, {2}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(size_t{4} << 20, 1.0f), more(1024, 1.0f);
    if (rrAllReduce(data.data(), data.data(), 1024, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
    if (rank == 2) raise(SIGSTOP);
    if (rank == 1) {
      const auto t0 = Clock::now();
      out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      out->seconds = seconds_since(t0);
      std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
      return;
    }
    // A third thread polls a receive from the stopped rank with rrTest all
    // through the abort: it must end with the abort's error, not a crash.
    std::vector<float> inbox(16);
    rrRequest_t pending = nullptr;
    if (rrIrecv(inbox.data(), inbox.size(), rrFloat32, 2, comm, &pending) != rrSuccess) _exit(7);
    std::atomic<int> blocking_result{-1};
    std::thread caller([&] {
      blocking_result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
    });
    std::atomic<int> polled_result{-1};
    std::thread poller([&] {
      for (;;) {
        int done = 0;
        const rrResult_t r = rrTest(pending, &done);
        if (r != rrSuccess || done) {
          polled_result = r;
          return;
        }
        std::this_thread::yield();
      }
    });
    rrRequest_t queued = nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (rrAllReduceAsync(more.data(), more.data(), more.size(), rrFloat32, rrSum, comm, &queued) != rrSuccess) _exit(7);
    const auto t0 = Clock::now();
    out->result = rrCommAbort(comm);
    out->seconds = seconds_since(t0);
    caller.join();
    poller.join();
    const rrResult_t waited = rrWait(queued);
    std::snprintf(out->error, sizeof(out->error), "abort: %s; blocking call: %s; queued call: %s (%s); polled receive: %s",
                  rrGetErrorString(static_cast<rrResult_t>(out->result)),
                  rrGetErrorString(static_cast<rrResult_t>(blocking_result.load())), rrGetErrorString(waited),
                  rrGetLastError(nullptr), rrGetErrorString(static_cast<rrResult_t>(polled_result.load())));
    if (blocking_result != rrInvalidUsage || waited != rrInvalidUsage || polled_result != rrInvalidUsage) {
      out->result = -2;
    }
  });
  print(outcomes, {2});
  EXPECT_EQ(outcomes[0].result, rrSuccess) << outcomes[0].error;
  EXPECT_LT(outcomes[0].seconds, 1.0) << "rrCommAbort took " << outcomes[0].seconds << " s";
  EXPECT_TRUE(has(outcomes[0], "aborted")) << outcomes[0].error;
  // Rank 1 waited on rank 0 (and the stopped rank 2); rank 0 told it.
  EXPECT_NE(outcomes[1].result, rrSuccess);
  EXPECT_TRUE(has(outcomes[1], "rank 0 aborted the communicator")) << outcomes[1].error;
  EXPECT_LT(outcomes[1].seconds, 10.0) << outcomes[1].error;
}

// Rank 0 sends on the world and receives on its duplicate in one group;
// rank 1 does the opposite, naming the communicators in the other order.
// Messages large enough to need the receiver's progress (rendezvous):
// finishing one communicator's part before posting the next would leave
// both ranks waiting for each other until the timeout.
TEST_F(Faults, GroupOverTwoCommunicatorsPostsBothBeforeWaiting) {
  auto outcomes = run_world(2, 5000, {}, [](int rank, rrComm_t world, Outcome* out) {
    rrComm_t dup = nullptr;
    if (rrCommSplit(world, 0, rank, &dup, nullptr) != rrSuccess) _exit(4);
    const size_t n = size_t{1} << 20;  // 4 MiB
    std::vector<float> mine(n, static_cast<float>(rank + 1)), theirs(n, 0.0f);
    rrComm_t first = rank == 0 ? world : dup;
    rrComm_t second = rank == 0 ? dup : world;
    const int peer = 1 - rank;
    const auto t0 = Clock::now();
    rrGroupStart();
    rrResult_t r = rrSend(mine.data(), n, rrFloat32, peer, first, nullptr);
    if (r == rrSuccess) r = rrRecv(theirs.data(), n, rrFloat32, peer, second, nullptr);
    const rrResult_t ended = rrGroupEnd();
    out->seconds = seconds_since(t0);
    out->result = r == rrSuccess ? ended : r;
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(nullptr));
    for (size_t i = 0; out->result == rrSuccess && i < n; ++i) {
      if (theirs[i] != static_cast<float>(peer + 1)) {
        out->result = -2;
        std::snprintf(out->error, sizeof(out->error), "element %zu: %g, expected %d", i, theirs[i], peer + 1);
      }
    }
    rrCommDestroy(dup);
    rrCommDestroy(world);
  });
  print(outcomes);
  for (const Outcome& o : outcomes) EXPECT_EQ(o.result, rrSuccess) << o.error;
}

// Rank 0 is inside an allreduce (another thread) that rank 1 joins only
// after it received rank 0's message: the send must be posted beside the
// running collective, not after it (which would be never, until the timeout).
TEST_F(Faults, PointToPointPostIsNotHeldBehindARunningCollective) {
  auto outcomes = run_world(2, 5000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> message(size_t{1} << 18, 7.0f);  // 1 MiB
    float x = static_cast<float>(rank + 1);
    rrResult_t sent = rrSuccess;
    rrResult_t reduced = rrSuccess;
    const auto t0 = Clock::now();
    if (rank == 0) {
      std::thread collective([&] { reduced = rrAllReduce(&x, &x, 1, rrFloat32, rrSum, comm, nullptr); });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the allreduce is running, waiting for rank 1
      rrRequest_t request = nullptr;
      sent = rrIsend(message.data(), message.size(), rrFloat32, 1, comm, &request);
      if (sent == rrSuccess) sent = rrWait(request);
      collective.join();
    } else {
      std::vector<float> got(message.size(), 0.0f);
      sent = rrRecv(got.data(), got.size(), rrFloat32, 0, comm, nullptr);
      if (sent == rrSuccess && got != message) sent = static_cast<rrResult_t>(-2);
      if (sent == rrSuccess) reduced = rrAllReduce(&x, &x, 1, rrFloat32, rrSum, comm, nullptr);
    }
    out->seconds = seconds_since(t0);
    out->result = sent != rrSuccess ? sent : reduced;
    if (out->result == rrSuccess && x != 3.0f) out->result = -3;
    std::snprintf(out->error, sizeof(out->error), "message: %d, allreduce: %d (%g): %s", sent, reduced, x,
                  rrGetLastError(comm));
    rrCommDestroy(comm);
  });
  print(outcomes);
  for (const Outcome& o : outcomes) EXPECT_EQ(o.result, rrSuccess) << o.error;
}

// Each rank issues an Async allreduce, then a send/recv group with the
// other. Rank 0 waits a little first, so its worker already runs the
// allreduce (waiting for rank 1's); rank 1's group comes while its
// allreduce is still queued. A group that held rank 1's communicator until
// rank 0's sends arrived would keep rank 1's allreduce from starting, and
// rank 0's group waits behind its running allreduce: both would sit until
// the timeout.
TEST_F(Faults, GroupBesideAQueuedAsyncCollective) {
  auto outcomes = run_world(2, 5000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> big(size_t{4} << 20, 1.0f);  // 16 MiB
    std::vector<float> mine(1024, static_cast<float>(rank + 1)), theirs(1024, 0.0f);
    const auto t0 = Clock::now();
    rrRequest_t request = nullptr;
    rrResult_t r = rrAllReduceAsync(big.data(), big.data(), big.size(), rrFloat32, rrSum, comm, &request);
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rrGroupStart();
    if (r == rrSuccess) r = rrSend(mine.data(), mine.size(), rrFloat32, 1 - rank, comm, nullptr);
    if (r == rrSuccess) r = rrRecv(theirs.data(), theirs.size(), rrFloat32, 1 - rank, comm, nullptr);
    const rrResult_t ended = rrGroupEnd();
    if (r == rrSuccess) r = ended;
    const rrResult_t waited = request ? rrWait(request) : rrInvalidUsage;
    if (r == rrSuccess) r = waited;
    out->seconds = seconds_since(t0);
    out->result = r;
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
    if (r == rrSuccess && (theirs[0] != static_cast<float>(2 - rank) || big[0] != 2.0f)) out->result = -2;
    rrCommDestroy(comm);
  });
  print(outcomes);
  for (const Outcome& o : outcomes) EXPECT_EQ(o.result, rrSuccess) << o.error;
}

// Rank 1 exits; the others fail their next allreduce naming it, then abort.
// Connecting to a peer that is closing at that moment (to tell it why)
// makes UCX print "mm_sysv.c ... shmat(...) failed" and, at close, warnings
// about the requests the failure left: the expected echo of a loss already
// reported, which must not reach stderr as UCX errors.
TEST_F(Faults, PeerThatLeftCausesNoUcxErrorLines) {
  for (int trial = 0; trial < 3; ++trial) {
    auto outcomes = run_world(4, 20000, {1}, [](int rank, rrComm_t comm, Outcome* out) {
      char path[64];
      std::snprintf(path, sizeof(path), "/tmp/rr-fault-stderr-%d", static_cast<int>(getpid()));
      const int log = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
      if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) _exit(4);  // UCX logs to stdout
      std::vector<float> data(size_t{1} << 20, 1.0f);
      if (rrAllReduce(data.data(), data.data(), 1024, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
      if (rank == 1) {
        unlink(path);
        _exit(0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
      std::string text = rrGetLastError(comm);
      if (rrCommAbort(comm) != rrSuccess) _exit(5);
      char lines[1024] = {};
      const ssize_t n = pread(log, lines, sizeof(lines) - 1, 0);
      unlink(path);
      if (n > 0 && std::strstr(lines, "UCX")) text = std::string("stderr: ") + lines;
      std::snprintf(out->error, sizeof(out->error), "%s", text.c_str());
    });
    print(outcomes, {1});
    for (int r : {0, 2, 3}) {
      const Outcome& o = outcomes[static_cast<size_t>(r)];
      EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
      EXPECT_FALSE(has(o, "stderr:")) << "rank " << r << " printed UCX lines: " << o.error;
      EXPECT_TRUE(has(o, "rank 1")) << o.error;
    }
  }
}

// A small broadcast takes the binomial tree: on 8 ranks from root 0, rank
// 0 feeds 4, 2 and 1, rank 4 feeds 6 and 5, rank 6 feeds 7. The root dies
// before it sends. Rank 6 neither neighbours the root on the ring nor has it
// as its parent: its parent (rank 4) fails but lives, and must tell it (and
// through the same notice rank 7) at once, not at the 60 s timeout.
TEST_F(Faults, TreeChildHearsOfItsParentsFailure) {
  auto outcomes = run_world(8, 60000, {0}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(256, static_cast<float>(rank));  // 1 KiB: the tree, not the chain
    if (rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
    if (rank == 0) raise(SIGKILL);
    const auto t0 = Clock::now();
    out->result = rrBroadcast(data.data(), data.data(), data.size(), rrFloat32, 0, comm, nullptr);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes, {0});
  for (int r = 1; r < 8; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrRemoteError) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank 0")) << o.error;
    EXPECT_LT(o.seconds, 10.0) << "far sooner than the 60 s timeout: " << o.error;
  }
}

TEST_F(Faults, HealthyCommunicatorHasNoAsyncError) {
  auto outcomes = run_world(2, 20000, {}, [](int, rrComm_t comm, Outcome* out) {
    float x = 1;
    out->result = rrAllReduce(&x, &x, 1, rrFloat32, rrSum, comm, nullptr);
    rrResult_t async = rrInternalError;
    if (rrCommGetAsyncError(comm, &async) != rrSuccess) _exit(8);
    out->async_error = async;
    if (rrCommDump(comm) != rrSuccess) _exit(8);
    rrCommDestroy(comm);
  });
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.result, rrSuccess) << o.error;
    EXPECT_EQ(o.async_error, rrSuccess);
  }
}

}  // namespace
