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

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What a rank reports to the parent through its pipe.
struct Outcome {
  int result = -1;        // rrResult_t of the call under test
  double seconds = 0;     // how long that call took
  int async_error = -1;   // rrCommGetAsyncError afterwards
  char error[1536] = {};  // rrGetLastError
};

using Body = std::function<void(int rank, rrComm_t comm, Outcome* out)>;

void report(int fd, const Outcome& o) {
  const char* p = reinterpret_cast<const char*>(&o);
  size_t left = sizeof(o);
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n <= 0) _exit(9);
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Runs `body` on `n` forked ranks (the victim may never report). Returns each
// rank's Outcome; a rank that did not report has result -1.
std::vector<Outcome> run_world(int n, int timeout_ms, const std::set<int>& silent, const Body& body) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < n; ++r) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      rrConfig_t config = RR_CONFIG_INITIALIZER;
      config.timeout_ms = timeout_ms;
      rrComm_t comm = nullptr;
      Outcome o;
      if (rrCommInitUrl(&comm, url.c_str(), n, r, &config) != rrSuccess) {
        std::snprintf(o.error, sizeof(o.error), "init: %s", rrGetLastError(nullptr));
        report(p[1], o);
        _exit(3);
      }
      body(r, comm, &o);
      report(p[1], o);
      _exit(0);  // no destroy: a broken communicator's peers may be gone
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (silent.count(r)) continue;
    Outcome o;
    ssize_t got = read(fds[static_cast<size_t>(r)], &o, sizeof(o));
    EXPECT_EQ(got, static_cast<ssize_t>(sizeof(o))) << "rank " << r << " died without reporting";
    if (got == static_cast<ssize_t>(sizeof(o))) outcomes[static_cast<size_t>(r)] = o;
    int status = 0;
    waitpid(pids[static_cast<size_t>(r)], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
  for (int r : silent) {
    kill(pids[static_cast<size_t>(r)], SIGKILL);
    waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
  }
  for (int fd : fds) close(fd);
  // Nothing left: every child has been reaped.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a rank process is left";
  return outcomes;
}

void print(const std::vector<Outcome>& outcomes, const std::set<int>& skip = {}) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (skip.count(static_cast<int>(r))) continue;
    std::printf("rank %zu: %s after %.3f s: %s\n", r,
                rrGetErrorString(static_cast<rrResult_t>(outcomes[r].result)), outcomes[r].seconds,
                outcomes[r].error);
  }
}

bool has(const Outcome& o, const std::string& text) { return std::string(o.error).find(text) != std::string::npos; }

std::set<std::string> shm_segments() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

// Shared-memory segments a test created and did not remove: none may be
// left, by any rank, SIGKILLed ones included (the survivors remove a
// segment a killed rank left, lib/transport/ucx/shm_sweep.hpp).
class NoShmLeft : public ::testing::Test {
 protected:
  void SetUp() override { before_ = shm_segments(); }
  void TearDown() override {
    for (const std::string& name : shm_segments()) {
      if (!before_.count(name)) ADD_FAILURE() << "shared-memory segment left behind: /dev/shm/" << name;
    }
  }
  std::set<std::string> before_;
  int sysv_orphan_ = -1;
};

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

// Every rank calls an allreduce of 1000 floats (sum) except `odd`, which
// calls `bad`. Every rank must fail with rrInvalidUsage quoting both calls.
void expect_mismatch(int n, int odd, const std::function<rrResult_t(rrComm_t, float*)>& bad,
                     const std::string& good_text, const std::string& bad_text) {
  auto outcomes = run_world(n, 20000, {}, [&](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(4096, 1.0f);
    const auto t0 = Clock::now();
    out->result = rank == odd ? bad(comm, data.data())
                              : rrAllReduce(data.data(), data.data(), 1000, rrFloat32, rrSum, comm, nullptr);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes);
  for (int r = 0; r < n; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrInvalidUsage) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, good_text)) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, bad_text)) << "rank " << r << ": " << o.error;
    EXPECT_TRUE(has(o, "rank " + std::to_string(odd) + " called")) << "rank " << r << ": " << o.error;
    EXPECT_LT(o.seconds, 10.0) << "not a timeout: " << o.error;
  }
}

const char* kGood = "allreduce #0 (count=1000, dtype=float32, op=sum)";

TEST_F(Faults, MismatchedCountIsReportedOnEveryRank) {
  expect_mismatch(4, 3, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 999, rrFloat32, rrSum, c, nullptr); },
                  kGood, "allreduce #0 (count=999, dtype=float32, op=sum)");
}

TEST_F(Faults, MismatchedDatatypeIsReportedOnEveryRank) {
  expect_mismatch(3, 0, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrInt32, rrSum, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=int32, op=sum)");
}

TEST_F(Faults, MismatchedOpIsReportedOnEveryRank) {
  expect_mismatch(5, 2, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrMax, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=float32, op=max)");
}

TEST_F(Faults, DifferentCollectiveIsReportedOnEveryRank) {
  expect_mismatch(4, 1, [](rrComm_t c, float* d) { return rrBroadcast(d, d, 1000, rrFloat32, 0, c, nullptr); },
                  kGood, "broadcast #0 (count=1000, dtype=float32, root=0)");
}

TEST_F(Faults, MismatchedRootIsReportedOnEveryRank) {
  auto outcomes = run_world(3, 20000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(64, 1.0f);
    out->result = rrBroadcast(data.data(), data.data(), 64, rrFloat32, rank == 1 ? 1 : 0, comm, nullptr);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes);
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.result, rrInvalidUsage) << o.error;
    EXPECT_TRUE(has(o, "root=0") && has(o, "root=1")) << o.error;
  }
}

TEST_F(Faults, MatchingCallsStillPassWithTheCheck) {
  // The check must not refuse what is legal: every collective, in turn.
  auto outcomes = run_world(3, 20000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> a(3 * 50, 1.0f), b(3 * 50, 0.0f);
    rrResult_t r = rrAllReduce(a.data(), b.data(), 50, rrFloat32, rrSum, comm, nullptr);
    if (r == rrSuccess) r = rrBroadcast(a.data(), b.data(), 50, rrFloat32, 2, comm, nullptr);
    if (r == rrSuccess) r = rrReduce(a.data(), b.data(), 50, rrFloat32, rrMin, 1, comm, nullptr);
    if (r == rrSuccess) r = rrAllGather(a.data(), b.data(), 50, rrFloat32, comm, nullptr);
    if (r == rrSuccess) r = rrReduceScatter(a.data(), b.data(), 50, rrFloat32, rrSum, comm, nullptr);
    if (r == rrSuccess) r = rrGather(a.data(), b.data(), 50, rrFloat32, 0, comm, nullptr);
    if (r == rrSuccess) r = rrScatter(a.data(), b.data(), 50, rrFloat32, 0, comm, nullptr);
    if (r == rrSuccess) r = rrAllToAll(a.data(), b.data(), 50, rrFloat32, comm, nullptr);
    if (r == rrSuccess) r = rrBarrier(comm, nullptr);
    (void)rank;
    out->result = r;
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  for (const Outcome& o : outcomes) EXPECT_EQ(o.result, rrSuccess) << o.error;
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
