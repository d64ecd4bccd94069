// A peer that dies or stops in the middle of an allreduce: the survivors
// return an error that names it instead of hanging. Ranks are forked
// processes (the parent only watches), so a rank can really die.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "free_port.hpp"

namespace {


enum class Fault { kKill, kStop };

struct Outcome {
  int result = -1;        // rrResult_t of the faulty allreduce, or -1
  double seconds = 0;     // how long that allreduce took to fail
  char error[512] = {};   // rrGetLastError
};

// Rank body, in a child: init, one good allreduce, then the victim faults
// while the others start a large allreduce. Writes its Outcome to `out_fd`.
[[noreturn]] void run_rank(const std::string& url, int n, int rank, int victim, Fault fault, int timeout_ms,
                           int out_fd) {
  Outcome outcome;
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.timeout_ms = timeout_ms;
  rrComm_t comm = nullptr;
  if (rrCommInitUrl(&comm, url.c_str(), n, rank, &config) != rrSuccess) {
    std::snprintf(outcome.error, sizeof(outcome.error), "init: %s", rrGetLastError(nullptr));
    (void)!write(out_fd, &outcome, sizeof(outcome));
    _exit(3);
  }
  std::vector<float> data(size_t{16} << 20, 1.0f);  // 64 MiB: many chunks in flight when the fault hits
  if (rrAllReduce(data.data(), data.data(), 1024, rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
  if (rank == victim) {
    if (fault == Fault::kKill) raise(SIGKILL);
    raise(SIGSTOP);  // the parent kills it once the others have reported
    _exit(5);
  }
  const auto t0 = std::chrono::steady_clock::now();
  outcome.result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::snprintf(outcome.error, sizeof(outcome.error), "%s", rrGetLastError(comm));
  // A later call on the failed communicator is refused, not hung.
  float x = 1;
  if (outcome.result != rrSuccess && rrAllReduce(&x, &x, 1, rrFloat32, rrSum, comm, nullptr) == rrSuccess) _exit(6);
  rrCommDestroy(comm);
  (void)!write(out_fd, &outcome, sizeof(outcome));
  _exit(0);
}

std::vector<Outcome> run_world(int n, int victim, Fault fault, int timeout_ms) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < n; ++r) {
    int p[2];
    EXPECT_EQ(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      run_rank(url, n, r, victim, fault, timeout_ms, p[1]);
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    Outcome o;
    ssize_t got = read(fds[r], &o, sizeof(o));
    EXPECT_EQ(got, static_cast<ssize_t>(sizeof(o))) << "rank " << r << " died without reporting";
    if (got == sizeof(o)) outcomes[r] = o;
    int status = 0;
    waitpid(pids[r], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " status " << status;
  }
  kill(pids[victim], SIGKILL);
  waitpid(pids[victim], nullptr, 0);
  for (int fd : fds) close(fd);
  return outcomes;
}

TEST(PeerFailure, KilledRankIsNamedBySurvivors) {
  // 3 ranks: rank 2 is the left neighbour of rank 0 and the right one of rank 1.
  auto outcomes = run_world(3, 2, Fault::kKill, 60000);
  for (int r : {0, 1}) {
    EXPECT_EQ(outcomes[r].result, rrRemoteError) << "rank " << r << ": " << outcomes[r].error;
    EXPECT_NE(std::string(outcomes[r].error).find("rank 2"), std::string::npos) << outcomes[r].error;
    // Far sooner than the 60 s timeout: the pid watch noticed.
    EXPECT_LT(outcomes[r].seconds, 30.0) << outcomes[r].error;
    std::printf("rank %d: %s after %.3f s: %s\n", r, rrGetErrorString(static_cast<rrResult_t>(outcomes[r].result)),
                outcomes[r].seconds, outcomes[r].error);
  }
}

TEST(PeerFailure, StoppedRankBecomesATimeoutNamingTheStep) {
  auto outcomes = run_world(3, 2, Fault::kStop, 1500);
  for (int r : {0, 1}) {
    std::printf("rank %d: %s after %.3f s: %s\n", r, rrGetErrorString(static_cast<rrResult_t>(outcomes[r].result)),
                outcomes[r].seconds, outcomes[r].error);
  }
  // Both survivors neighbour the stopped rank 2 and wait for its operation
  // header. Each times out naming it, or hears first from the other one,
  // whose notice names it.
  int timeouts = 0;
  for (int r : {0, 1}) {
    EXPECT_TRUE(outcomes[r].result == rrTimeout || outcomes[r].result == rrRemoteError) << outcomes[r].error;
    EXPECT_NE(std::string(outcomes[r].error).find("allreduce #1"), std::string::npos) << outcomes[r].error;
    EXPECT_NE(std::string(outcomes[r].error).find("from rank 2"), std::string::npos) << outcomes[r].error;
    timeouts += outcomes[r].result == rrTimeout ? 1 : 0;
  }
  EXPECT_GE(timeouts, 1);
}

}  // namespace
