#pragma once
// Ranks on one GPU without a launcher: the program starts copies of itself
// (fork + exec, so no CUDA state crosses a fork) that meet through a
// file:// rendezvous, and asks a child process whether a GPU can be used at
// all, so that the parent never initializes CUDA. Used by the GPU tests and
// the GPU allreduce benchmark, which run on a bare machine (DEVICE.md).
//
//   int main(int argc, char** argv) {
//     rr::test::RankEnv env;
//     if (rr::test::this_is_a_rank(&env)) return run_rank(env);
//     ... rr::test::probe_gpu() (77: no GPU) ... rr::test::fork_exec_ranks(n, argv, dir, timeout_s) ...
//   }

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rr::test {

struct RankEnv {
  std::string url;  // file:// rendezvous for rrCommInitUrl
  int rank = 0;
  int size = 1;
};

// Whether this process is a rank started by fork_exec_ranks(); *env says which.
inline bool this_is_a_rank(RankEnv* env) {
  const char* rank = std::getenv("RR_FORKED_RANK");
  if (!rank) return false;
  env->rank = std::atoi(rank);
  env->size = std::atoi(std::getenv("RR_FORKED_SIZE"));
  env->url = std::getenv("RR_FORKED_URL");
  return true;
}

// 0 (and the GPU's name printed) when GPU 0 can be used; else 77, with a
// line "SKIP: reason" printed.
inline int probe_gpu() {
  const pid_t child = fork();
  if (child == 0) {
    int devices = 0;
    const cudaError_t error = cudaGetDeviceCount(&devices);
    if (error != cudaSuccess || devices == 0) {
      std::printf("SKIP: no usable GPU (cudaGetDeviceCount: %s)\n",
                  error != cudaSuccess ? cudaGetErrorString(error) : "0 devices");
      std::fflush(stdout);
      _exit(77);
    }
    cudaDeviceProp props{};
    cudaGetDeviceProperties(&props, 0);
    std::printf("GPU 0: %s (compute capability %d.%d); every rank uses it\n", props.name, props.major, props.minor);
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `size` ranks of this binary (argv as given); rank 0 prints to the
// terminal, the others to DIR/rankR-of-N.log, shown when they fail. Ranks
// still running after `timeout_s` are killed. 0 when every rank exited 0.
inline int fork_exec_ranks(int size, char** argv, const std::string& dir, int timeout_s) {
  const std::string url = "file://" + dir + "/store-" + std::to_string(size);
  auto log_of = [&](int r) { return dir + "/rank" + std::to_string(r) + "-of-" + std::to_string(size) + ".log"; };
  std::fflush(stdout);
  std::vector<pid_t> ranks;
  const pid_t launcher = getpid();
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      // A launcher killed from outside (a time limit) takes its ranks along:
      // none is left holding the GPU for the next test.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(1);
      if (r > 0 && (!std::freopen(log_of(r).c_str(), "w", stdout) || !std::freopen(log_of(r).c_str(), "a", stderr))) {
        _exit(1);
      }
      setenv("RR_FORKED_URL", url.c_str(), 1);
      setenv("RR_FORKED_RANK", std::to_string(r).c_str(), 1);
      setenv("RR_FORKED_SIZE", std::to_string(size).c_str(), 1);
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    if (pid > 0) ranks.push_back(pid);
  }
  int failed = static_cast<int>(size - static_cast<int>(ranks.size()));
  size_t left = ranks.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --left;
      const int r = static_cast<int>(std::find(ranks.begin(), ranks.end(), pid) - ranks.begin());
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        ++failed;
        std::printf("rank %d of %d failed (%s %d)\n", r, size, WIFEXITED(status) ? "exit" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        if (r > 0) std::printf("%s", read_text(log_of(r)).c_str());
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("%d rank(s): timed out after %d s; killing them\n", size, timeout_s);
      for (pid_t p : ranks) kill(p, SIGKILL);
      while (waitpid(-1, &status, 0) > 0) {
      }
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return failed == 0 ? 0 : 1;
}

// Rank counts from a variable such as "2 4", or `fallback`.
inline std::vector<int> rank_counts(const char* variable, std::vector<int> fallback) {
  const char* chosen = std::getenv(variable);
  if (!chosen) return fallback;
  std::vector<int> sizes;
  std::istringstream words(chosen);
  for (int n = 0; words >> n;) sizes.push_back(n);
  return sizes;
}

}  // namespace rr::test
