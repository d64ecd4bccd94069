#include "world.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "free_port.hpp"

namespace fault_world {

namespace {

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

}  // namespace

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

void check(bool ok, const std::string& what, Outcome* out) {
  if (ok || out->result == -2) return;
  out->result = -2;
  std::snprintf(out->error, sizeof(out->error), "%s", what.c_str());
}

void note(Outcome* out, const char* what, rrResult_t result, rrComm_t comm) {
  const size_t used = std::strlen(out->error);
  std::snprintf(out->error + used, sizeof(out->error) - used, "%s%s: %s (%s)", used ? "; " : "", what,
                rrGetErrorString(result), rrGetLastError(comm));
}

void print(const std::vector<Outcome>& outcomes, const std::set<int>& skip) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (skip.count(static_cast<int>(r))) continue;
    std::printf("rank %zu: %s after %.3f s: %s\n", r,
                rrGetErrorString(static_cast<rrResult_t>(outcomes[r].result)), outcomes[r].seconds,
                outcomes[r].error);
  }
}

std::set<std::string> shm_segments() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

void call_until_failure(rrComm_t comm, const Call& call, Outcome* out, bool aborted, long limit) {
  for (long i = 0; i < limit; ++i) {
    const auto t0 = Clock::now();
    out->result = call(comm);
    out->seconds = seconds_since(t0);  // of the call that failed: its deadline counts from its start
    if (out->result != rrSuccess) break;
  }
  std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(aborted ? nullptr : comm));
}

Body strike(int victim, int signal, std::chrono::milliseconds delay, const std::function<void(rrComm_t)>& require,
            const Call& call) {
  return [=](int rank, rrComm_t comm, Outcome* out) {
    require(comm);
    if (rank == victim) {
      std::thread([=] {
        std::this_thread::sleep_for(delay);
        raise(signal);
      }).detach();
    }
    call_until_failure(comm, call, out);
  };
}

void kill_every_rank_mid_calls(int n, const std::function<void(rrComm_t)>& require, const Call& call) {
  // No survivor cleans up, and none needs to.
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> ranks;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(60);  // a rank that never got to its strike still ends
      rrComm_t comm = nullptr;
      if (rrCommInitUrl(&comm, url.c_str(), n, r, nullptr) != rrSuccess) _exit(3);
      require(comm);
      if (call(comm) != rrSuccess) _exit(4);
      std::thread([r] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 + 5 * r));
        raise(SIGKILL);
      }).detach();
      for (;;) (void)call(comm);
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

void expect_mismatch(int n, int odd, const Call& good, const Call& bad, const std::string& good_text,
                     const std::string& bad_text, const Call& warmup, int warmups) {
  auto outcomes = run_world(n, 20000, {}, [&](int rank, rrComm_t comm, Outcome* out) {
    for (int i = 0; i < warmups; ++i) {
      if (warmup(comm) != rrSuccess) _exit(5);
    }
    const auto t0 = Clock::now();
    out->result = rank == odd ? bad(comm) : good(comm);
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

Call on_floats(const std::function<rrResult_t(rrComm_t comm, float* data)>& call) {
  return [call](rrComm_t comm) {
    std::vector<float> data(size_t{1} << 20, 1.0f);
    return call(comm, data.data());
  };
}

void expect_stopped_peer_times_out(const std::function<void(rrComm_t)>& require, const Call& call,
                                   std::chrono::milliseconds delay, const std::string& where) {
  const int timeout_ms = 1500;
  auto outcomes = run_world(2, timeout_ms, {1}, strike(1, SIGSTOP, delay, require, call));
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  EXPECT_TRUE(has(o, "rank 1") && has(o, where)) << o.error;
  EXPECT_LT(o.seconds, timeout_ms / 1000.0 + 0.5) << o.error;
}

void expect_abort_ends_the_wait(const std::function<void(rrComm_t)>& require, const Call& call,
                                std::chrono::milliseconds delay) {
  auto outcomes = run_world(2, 60000, {1}, [&](int rank, rrComm_t comm, Outcome* out) {
    require(comm);
    if (rank == 1) {
      std::thread([delay] {
        std::this_thread::sleep_for(delay);
        raise(SIGSTOP);
      }).detach();
    } else {
      std::thread([comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        rrCommAbort(comm);
      }).detach();
    }
    call_until_failure(comm, call, out, true);
  });
  print(outcomes, {1});
  EXPECT_EQ(outcomes[0].result, rrInvalidUsage) << outcomes[0].error;
  EXPECT_TRUE(has(outcomes[0], "aborted")) << outcomes[0].error;
  EXPECT_LT(outcomes[0].seconds, 5.0) << "the abort ended the wait, not the 60 s timeout";
}

}  // namespace fault_world
