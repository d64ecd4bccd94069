// rr-shrink-bench: from a rank's death to a working shrunk communicator on
// every survivor (issue 36's target), and beside it the other way a program
// goes on today: a new rendezvous of the survivors through a store.
//
//   build/bench/rr-shrink-bench [-n RANKS] [-r ROUNDS] [--agree]
//   (-n/--ranks 2-256, default 8; -r/--rounds 1-1000, default 3)
//
// Forks RANKS ranks on this host (one TCP store each round, on free ports).
// They allreduce 256 KiB in a loop; at step 50 the last rank writes the
// monotonic time and SIGKILLs itself. Each survivor reports: detection (the
// kill to its call failing), rrCommRevoke, rrCommShrink, the first allreduce
// on the new communicator (checked), the total; with --agree the shrink is
// rrCommShrinkFailed (the survivors agree on the lost rank; checked) instead
// of rrCommShrink with the list; then a fresh
// rrCommInitUrl of the survivors on another port, timed. Prints one line
// per survivor and round; exits 1 if anything failed.

#include <netinet/in.h>
#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace {

const char kUsage[] =
    "usage: rr-shrink-bench [-n RANKS (2-256, default 8)] [-r ROUNDS (1-1000, default 3)] [--agree]\n"
    "  the kill of the last rank to a working shrunk communicator on every survivor, beside a new\n"
    "  rendezvous of the survivors; --agree: rrCommShrinkFailed instead of rrCommShrink with the list\n";

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("rr-shrink-bench: a free port");
    std::exit(1);
  }
  close(fd);
  return ntohs(a.sin_port);
}

// One rank of a round; `killed_at` is shared with the others (the victim's time).
int run_rank(int rank, int n, int port, int port2, bool agree, volatile double* killed_at) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.timeout_ms = 20000;
  rrComm_t comm = nullptr;
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  if (rrCommInitUrl(&comm, url.c_str(), n, rank, &config) != rrSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, rrGetLastError(nullptr));
    return 1;
  }
  std::vector<float> v(size_t{1} << 16, 1.0f);
  for (int i = 0;; ++i) {
    if (rank == n - 1 && i == 50) {
      *killed_at = now();
      raise(SIGKILL);
    }
    if (rrAllReduce(v.data(), v.data(), v.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess) break;
  }
  const double failed = now();
  const rrResult_t revoked = rrCommRevoke(comm);
  const double after_revoke = now();
  const int lost[] = {n - 1};
  rrComm_t next = nullptr;
  std::vector<int> agreed(static_cast<size_t>(n), -1);
  int n_agreed = 0;
  const rrResult_t shrunk = agree ? rrCommShrinkFailed(comm, &next, agreed.data(), &n_agreed, nullptr)
                                  : rrCommShrink(comm, lost, 1, &next, nullptr);
  const double after_shrink = now();
  if (agree && shrunk == rrSuccess && (n_agreed != 1 || agreed[0] != n - 1)) {
    std::fprintf(stderr, "rank %d: agreed on %d ranks, the first %d; expected {%d}\n", rank, n_agreed, agreed[0], n - 1);
    return 1;
  }
  std::vector<float> w(size_t{1} << 16, 1.0f);
  rrResult_t first = shrunk;
  if (shrunk == rrSuccess) first = rrAllReduce(w.data(), w.data(), w.size(), rrFloat32, rrSum, next, nullptr);
  const double after_first = now();
  const bool right = first == rrSuccess && w[0] == static_cast<float>(n - 1) && w.back() == static_cast<float>(n - 1);
  if (next) rrCommDestroy(next);
  rrCommDestroy(comm);
  // The other way: the survivors meet again through a store.
  const std::string url2 = "tcp://127.0.0.1:" + std::to_string(port2);
  rrComm_t fresh = nullptr;
  const double before = now();
  const rrResult_t made = rrCommInitUrl(&fresh, url2.c_str(), n - 1, rank, &config);
  const double after_made = now();
  if (fresh) rrCommDestroy(fresh);
  const double killed = *killed_at;
  std::printf("rank %d: detect %.1f ms, revoke %.1f ms, %s %.1f ms, first allreduce %.1f ms: %.1f ms from the "
              "kill; a new rendezvous instead: %.1f ms\n",
              rank, (failed - killed) * 1e3, (after_revoke - failed) * 1e3, agree ? "agree and shrink" : "shrink",
              (after_shrink - after_revoke) * 1e3,
              (after_first - after_shrink) * 1e3, (after_first - killed) * 1e3, (after_made - before) * 1e3);
  std::fflush(stdout);
  const bool ok = revoked == rrSuccess && right && made == rrSuccess;
  if (!ok) std::fprintf(stderr, "rank %d: %s\n", rank, rrGetLastError(nullptr));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 8;
  int rounds = 3;
  bool agree = false;
  std::string ranks_text, rounds_text;
  rr::tools::CommandLine command_line("rr-shrink-bench");
  command_line.app.add_option("-n,--ranks", ranks_text);
  command_line.app.add_option("-r,--rounds", rounds_text);
  command_line.app.add_flag("--agree", agree);
  command_line.parse_or_exit(argc, argv, kUsage);
  if (command_line.given("-n")) n = static_cast<int>(command_line.whole("-n", ranks_text, 2, 256));
  if (command_line.given("-r")) rounds = static_cast<int>(command_line.whole("-r", rounds_text, 1, 1000));
  auto* killed_at = static_cast<volatile double*>(
      mmap(nullptr, sizeof(double), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  bool ok = true;
  for (int round = 0; round < rounds; ++round) {
    std::printf("# round %d, %d ranks, %s\n", round, n, agree ? "rrCommShrinkFailed" : "rrCommShrink");
    std::fflush(stdout);
    const int port = free_port();
    const int port2 = free_port();
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
      const pid_t pid = fork();
      if (pid == 0) _exit(run_rank(r, n, port, port2, agree, killed_at));
      pids.push_back(pid);
    }
    for (int r = 0; r < n; ++r) {
      int status = 0;
      waitpid(pids[static_cast<size_t>(r)], &status, 0);
      const bool victim = r == n - 1;
      if (victim ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) : !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "rr-shrink-bench: rank %d ended with status %d\n", r, status);
        ok = false;
      }
    }
  }
  return ok ? 0 : 1;
}
