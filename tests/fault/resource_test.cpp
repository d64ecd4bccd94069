// Resource faults with real processes: /dev/shm too small, an open file
// limit too low, a rendezvous port another process holds, counts whose
// buffers cannot exist, and a staging pool larger than the host's memory. Every rank must return an error that names the
// resource, none may wait for the others until its timeout, and nothing may
// be left: no rank process, no file in /dev/shm.
//
// Each job runs on a "host": a forked child that, where it may (root, mount
// namespaces), unshares its mount namespace and mounts a tmpfs of its own on
// /dev/shm, of the size the test wants; its ranks are forked from it. The
// leftover check then sees this job's files only, whatever else runs on the
// machine. The /dev/shm test needs that and skips without it; the others
// fall back to the machine's /dev/shm.
//
// The ranks' timeout is 10 minutes and the host gives them 60 s to report:
// a rank that reports at all did not wait for a timeout (no wall-clock
// assertion needed).

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <ringreduce/ringreduce.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "free_port.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRankTimeoutMs = 600000;  // far past the host's deadline
constexpr int kReportSeconds = 60;      // the host's deadline for every report

// What a rank reports through its pipe.
struct Outcome {
  int reported = 0;
  int init_result = -1;  // rrCommInitUrl
  int result = -1;       // the call under test (init's, when init failed)
  char error[2048] = {};
};

// What a host reports: its ranks' outcomes and what they left.
struct HostReport {
  static constexpr int kMaxRanks = 8;
  int status = 0;  // 0 ran, 77 no private /dev/shm where one was required
  int private_shm = 0;
  int leftover_processes = 0;
  char leftover_files[1024] = {};
  Outcome ranks[kMaxRanks];
};

// Runs in a rank after fork, before init: sets the fault up.
using Setup = std::function<void(int rank)>;
// Runs in a rank after a successful init; fills `out`.
using Body = std::function<void(int rank, rrComm_t comm, Outcome* out)>;

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::set<std::string> shm_files() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

// In the host: `n` ranks on `url`, each reporting within kReportSeconds or
// killed. Fills report->ranks.
void fork_ranks_over_url(int n, const std::string& url, const Setup& setup, const Body& body, HostReport* report) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) _exit(90);
    const pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      if (setup) setup(r);
      Outcome o;
      o.reported = 1;
      rrConfig_t config = RR_CONFIG_INITIALIZER;
      config.timeout_ms = kRankTimeoutMs;
      rrComm_t comm = nullptr;
      o.init_result = rrCommInitUrl(&comm, url.c_str(), n, r, &config);
      if (o.init_result != rrSuccess) {
        o.result = o.init_result;
        std::snprintf(o.error, sizeof(o.error), "%s", rrGetLastError(nullptr));
      } else {
        body(r, comm, &o);
        if (rrCommDestroy(comm) != rrSuccess) _exit(5);
      }
      write_all(p[1], &o, sizeof(o));
      _exit(0);
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(kReportSeconds);
  for (int r = 0; r < n; ++r) {
    pollfd pfd{fds[static_cast<size_t>(r)], POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    Outcome o;
    if (poll(&pfd, 1, static_cast<int>(std::max<long long>(left, 0))) == 1 &&
        read_all(fds[static_cast<size_t>(r)], &o, sizeof(o))) {
      report->ranks[r] = o;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (!report->ranks[r].reported) kill(pids[static_cast<size_t>(r)], SIGKILL);  // hung: fails the test
    waitpid(pids[static_cast<size_t>(r)], nullptr, 0);
    close(fds[static_cast<size_t>(r)]);
  }
}

// Runs a job of `n` ranks on a host of its own whose /dev/shm is a tmpfs of
// `shm_bytes` (where the host may mount one; `need_private_shm` makes that a
// condition). Returns what the host saw.
HostReport run_host(int n, const std::string& url, size_t shm_bytes, bool need_private_shm, const Setup& setup,
                    const Body& body) {
  HostReport report;
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  const pid_t host = fork();
  if (host == 0) {
    close(p[0]);
    HostReport r;
    r.private_shm = unshare(CLONE_NEWNS) == 0 && mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                          ("size=" + std::to_string(shm_bytes)).c_str()) == 0;
    if (!r.private_shm && need_private_shm) {
      r.status = 77;
      write_all(p[1], &r, sizeof(r));
      _exit(0);
    }
    const std::set<std::string> before = shm_files();
    fork_ranks_over_url(n, url, setup, body, &r);
    while (waitpid(-1, nullptr, WNOHANG) > 0) ++r.leftover_processes;  // none may be left unreaped
    std::string left;
    for (const std::string& name : shm_files()) {
      if (!before.count(name)) left += name + " ";
    }
    std::snprintf(r.leftover_files, sizeof(r.leftover_files), "%s", left.c_str());
    write_all(p[1], &r, sizeof(r));
    _exit(0);
  }
  close(p[1]);
  const bool got = read_all(p[0], &report, sizeof(report));
  EXPECT_TRUE(got) << "the host died without reporting";
  close(p[0]);
  int status = 0;
  waitpid(host, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "host status " << status;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a process is left";
  return report;
}

std::string tcp_url(uint16_t port) { return "tcp://127.0.0.1:" + std::to_string(port); }

bool has(const Outcome& o, const std::string& text) { return std::string(o.error).find(text) != std::string::npos; }

void print(const HostReport& report, int n) {
  for (int r = 0; r < n; ++r) {
    const Outcome& o = report.ranks[r];
    if (!o.reported) {
      std::printf("rank %d: no report within %d s (killed)\n", r, kReportSeconds);
      continue;
    }
    std::printf("rank %d: %s %s: %s\n", r, o.init_result == rrSuccess ? "call" : "init",
                rrGetErrorString(static_cast<rrResult_t>(o.result)), o.error);
  }
}

// Every rank reported an error (not success, not a timeout) containing each
// of `texts`, and nothing is left.
void expect_named_everywhere(const HostReport& report, int n, const std::vector<std::string>& texts) {
  print(report, n);
  for (int r = 0; r < n; ++r) {
    const Outcome& o = report.ranks[r];
    ASSERT_TRUE(o.reported) << "rank " << r << " did not fail within " << kReportSeconds
                            << " s: it waits for the others (its timeout is " << kRankTimeoutMs / 1000 << " s)";
    EXPECT_NE(o.result, rrSuccess) << "rank " << r;
    EXPECT_NE(o.result, rrTimeout) << "rank " << r << ": " << o.error;
    for (const std::string& text : texts) EXPECT_TRUE(has(o, text)) << "rank " << r << " does not name '" << text << "': " << o.error;
  }
  EXPECT_EQ(report.leftover_processes, 0) << "rank processes left";
  EXPECT_STREQ(report.leftover_files, "") << "left in /dev/shm";
}

// /dev/shm holds UCX's shared-memory FIFOs and receive buffers, about
// 4.2 MiB per rank: a 10 MiB one takes two ranks, not the third (or, as
// they compete for it, only one). The ranks that fit must hear from one that
// did not (not wait for it), and all must name /dev/shm: UCX's own line
// about it, and the space left where it is still short.
TEST(Resources, FullDevShmIsNamedByEveryRank) {
  const int n = 3;
  const HostReport report = run_host(n, tcp_url(free_port()), size_t{10} << 20, /*need_private_shm=*/true, nullptr,
                                     [](int, rrComm_t, Outcome* out) { out->result = rrSuccess; });
  if (report.status == 77) GTEST_SKIP() << "no private /dev/shm here (needs root and mount namespaces)";
  expect_named_everywhere(report, n, {"/dev/shm"});
  int own = 0;
  for (int r = 0; r < n; ++r) own += report.ranks[r].result == rrSystemError ? 1 : 0;
  EXPECT_GE(own, 1) << "a rank that did not fit reports it itself";
}

// One rank's open file limit leaves no room for UCX (which, short of
// descriptors, aborts the process as often as it returns an error). That
// rank names the limit, and so do the others, from it. As rank 0, it also
// serves the rendezvous: it must keep serving until the others have heard.
void expect_low_file_limit_named(int victim) {
  const int n = 3;
  const HostReport report = run_host(
      n, tcp_url(free_port()), size_t{256} << 20, false,
      [victim](int rank) {
        if (rank != victim) return;
        long open = 0;
        if (DIR* d = opendir("/proc/self/fd")) {
          while (readdir(d)) ++open;
          closedir(d);
        }
        const rlim_t limit = static_cast<rlim_t>(open + 8);
        rlimit rl{limit, limit};
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(91);
      },
      [](int, rrComm_t, Outcome* out) { out->result = rrSuccess; });
  expect_named_everywhere(report, n, {"open file limit (ulimit -n "});
  EXPECT_EQ(report.ranks[victim].result, rrSystemError) << report.ranks[victim].error;
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    EXPECT_TRUE(has(report.ranks[r], "rank " + std::to_string(victim) + " failed to set up"))
        << "rank " << r << ": " << report.ranks[r].error;
  }
}

TEST(Resources, LowOpenFileLimitOnOneRankIsNamedByEveryRank) { expect_low_file_limit_named(1); }

TEST(Resources, LowOpenFileLimitOnTheServingRankIsNamedByEveryRank) { expect_low_file_limit_named(0); }

// MASTER_PORT is held by another program that listens there and says
// nothing. Rank 0 cannot serve on it; the others reach that program instead
// of a rendezvous. Every rank must name the port.
TEST(Resources, PortInUseIsNamedByEveryRank) {
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(holder, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);
  const int n = 3;
  const HostReport report = run_host(n, tcp_url(port), size_t{256} << 20, false, nullptr,
                                     [](int, rrComm_t, Outcome* out) { out->result = rrSuccess; });
  close(holder);
  expect_named_everywhere(report, n, {"in use by another process"});
  EXPECT_TRUE(has(report.ranks[0], "port " + std::to_string(port) + " on 127.0.0.1")) << report.ranks[0].error;
  for (int r = 1; r < n; ++r) {
    EXPECT_TRUE(has(report.ranks[r], "127.0.0.1:" + std::to_string(port))) << "rank " << r << ": "
                                                                           << report.ranks[r].error;
  }
}

// Counts whose buffers cannot exist: count x element size overflows size_t,
// or the buffer would end past any process's address space. Every form is
// refused on every rank at once (the arguments are checked before anything
// is sent), naming the count; the communicator stays usable and the ranks
// agree on the next call. (rrReduce's non-root ranks used to send the call
// on, out of step with the root that refused it.)
TEST(Resources, CountsWhoseBuffersCannotExistAreRefusedOnEveryRank) {
  const int n = 3;
  struct Case {
    const char* name;
    std::function<rrResult_t(rrComm_t, float*, float*)> call;
    const char* text;
  };
  const size_t overflowing = (size_t{1} << 62) + 1;  // x 4 bytes overflows size_t
  const size_t too_large = size_t{1} << 60;          // 4 EiB: no address space has it
  const std::vector<Case> cases = {
      {"rrAllReduce in place, 2^62+1 floats",
       [=](rrComm_t c, float* a, float*) { return rrAllReduce(a, a, overflowing, rrFloat32, rrSum, c, nullptr); },
       "x 4 bytes overflows size_t"},
      {"rrAllReduce in place, 2^60 floats",
       [=](rrComm_t c, float* a, float*) { return rrAllReduce(a, a, too_large, rrFloat32, rrSum, c, nullptr); },
       "count=1152921504606846976 x 4 bytes (4 EiB) at sendbuff cannot exist"},
      {"rrAllReduce out of place, 2^60 floats",
       [=](rrComm_t c, float* a, float* b) { return rrAllReduce(a, b, too_large, rrFloat32, rrSum, c, nullptr); },
       "cannot exist"},
      {"rrReduce out of place, 2^60 doubles",
       [=](rrComm_t c, float* a, float* b) { return rrReduce(a, b, too_large, rrFloat64, rrSum, 0, c, nullptr); },
       "cannot exist"},
      {"rrReduceScatter, 2^60 floats per rank",
       [=](rrComm_t c, float* a, float* b) { return rrReduceScatter(a, b, too_large, rrFloat32, rrSum, c, nullptr); },
       "cannot exist"},
      {"rrAllGather, 2^60 floats per rank",
       [=](rrComm_t c, float* a, float* b) { return rrAllGather(a, b, too_large, rrFloat32, c, nullptr); },
       "cannot exist"},
      {"rrBroadcast, 2^60 floats",
       [=](rrComm_t c, float* a, float*) { return rrBroadcast(a, a, too_large, rrFloat32, 0, c, nullptr); },
       "cannot exist"},
      // 2^55 elements of 4 or 8 bytes: past the address space only counted
      // in bytes of their type, not in elements (the calls below once
      // checked as if elements were bytes).
      {"rrBroadcast, 2^55 floats",
       [=](rrComm_t c, float* a, float*) { return rrBroadcast(a, a, size_t{1} << 55, rrFloat32, 0, c, nullptr); },
       "count=36028797018963968 x 4 bytes (128 PiB) at"},
      {"rrReduce, 2^55 doubles",
       [=](rrComm_t c, float* a, float* b) { return rrReduce(a, b, size_t{1} << 55, rrFloat64, rrSum, 0, c, nullptr); },
       "x 8 bytes (256 PiB) at sendbuff cannot exist"},
      {"rrGather, 2^55 floats per rank",
       [=](rrComm_t c, float* a, float* b) { return rrGather(a, b, size_t{1} << 55, rrFloat32, 0, c, nullptr); },
       "cannot exist"},
      {"rrScatter, 2^55 floats per rank",
       [=](rrComm_t c, float* a, float* b) { return rrScatter(a, b, size_t{1} << 55, rrFloat32, 0, c, nullptr); },
       "cannot exist"},
      {"rrAllToAll, 2^54 floats per peer",
       [=](rrComm_t c, float* a, float* b) { return rrAllToAll(a, b, size_t{1} << 54, rrFloat32, c, nullptr); },
       "cannot exist"},
      {"rrSend, 2^55 floats",
       [=](rrComm_t c, float* a, float*) {
         int rank = 0, size = 1;
         rrCommUserRank(c, &rank);
         rrCommCount(c, &size);
         return rrSend(a, size_t{1} << 55, rrFloat32, (rank + 1) % size, c, nullptr);
       },
       "cannot exist"},
  };
  static_assert(HostReport::kMaxRanks >= 3, "");
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const HostReport report =
        run_host(n, tcp_url(free_port()), size_t{256} << 20, false, nullptr, [&k](int, rrComm_t comm, Outcome* out) {
          std::vector<float> a(1024, 1.0f), b(1024, 0.0f);
          out->result = k.call(comm, a.data(), b.data());
          std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
          // Still usable, and still in step: a real call after the refused one.
          if (rrAllReduce(a.data(), b.data(), a.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess || b[0] != 3.0f) {
            std::snprintf(out->error, sizeof(out->error), "the allreduce after the refused call failed: %s",
                          rrGetLastError(comm));
            out->result = rrSuccess;  // fails the check below
          }
        });
    expect_named_everywhere(report, n, {k.text});
    for (int r = 0; r < n; ++r) EXPECT_EQ(report.ranks[r].result, rrInvalidArgument) << "rank " << r;
  }
}

// A staging pool larger than the host's memory (RR_CHUNK_BYTES=1G x 2 x
// RR_PIPELINE_DEPTH=64 = 128 GiB on one rank): its pages are all written at
// setup, so it is refused before it is mapped, naming the sizes and the
// settings, not left to the OOM killer; the others hear of it. The rank
// also runs under an 8 GiB address-space limit, so that a library without
// the check fails to map it rather than exhaust the machine.
TEST(Resources, StagingPoolLargerThanMemoryIsNamedByEveryRank) {
  const uint64_t pool = uint64_t{128} << 30;
  uint64_t available_kib = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[128];
    while (std::fgets(line, sizeof(line), f)) {
      unsigned long long v = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &v) == 1) available_kib = v;
    }
    std::fclose(f);
  }
  if (available_kib == 0 || available_kib * 1024 >= pool) GTEST_SKIP() << "this host has 128 GiB available";
  const int n = 3;
  const int victim = 2;
  const HostReport report = run_host(
      n, tcp_url(free_port()), size_t{256} << 20, false,
      [](int rank) {
        if (rank != victim) return;
        setenv("RR_CHUNK_BYTES", "1G", 1);
        setenv("RR_PIPELINE_DEPTH", "64", 1);
        rlimit rl{rlim_t{8} << 30, rlim_t{8} << 30};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(92);
      },
      [](int, rrComm_t, Outcome* out) { out->result = rrSuccess; });
  expect_named_everywhere(report, n, {"staging pool: 128 GiB (128 slots of 1024 MiB) is more than the", "RR_CHUNK_BYTES"});
  EXPECT_EQ(report.ranks[victim].result, rrSystemError);
}

}  // namespace
