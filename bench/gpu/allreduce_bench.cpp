// rr-gpu-allreduce-bench: allreduce of float32 sums on device buffers, 2 and
// 4 ranks sharing GPU 0, from 1 MiB to 1 GiB, through the C API on a stream
// (the staging pipeline: D2H into pinned slots, the host ring, H2D back).
// Beside each time, the pipeline's three stages measured alone over the whole
// tensor, on every rank at once as in the allreduce: a D2H copy into pinned
// memory, the host allreduce of pinned host buffers, an H2D copy back.
//
//   overlap = allreduce time / (d2h + host + h2d)   (1: no overlap; 1/3: perfect)
//   slowest = allreduce time / max(d2h, host, h2d)  (issue 5's target: <= 1.3 at 1 GiB)
//   busbw   = bytes / time x 2(N-1)/N               (nccl-tests' definition)
//
// Each figure is the slowest rank's median of --iterations timed calls
// after one warm-up. The binary launches its own ranks
// (tests/common/fork_ranks.hpp); rank 0 prints one row per size:
//   allreduce RANKS MIB TIME_MS ALGBW_GBS BUSBW_GBS D2H_MS HOST_MS H2D_MS OVERLAP SLOWEST
// Usage: rr-gpu-allreduce-bench [--ranks 2,4] [--min-mib 1] [--max-mib 1024] [--iterations 5]
// Exits 77 when no GPU can be used.

#include <cuda_runtime_api.h>
#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "../../tests/common/fork_ranks.hpp"
#include "command_line.hpp"

namespace {

struct Options {
  std::vector<int> ranks = {2, 4};
  size_t min_mib = 1;
  size_t max_mib = 1024;
  int iterations = 5;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rr-gpu-allreduce-bench: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(error));
}

void check(rrResult_t result, const char* what, rrComm_t comm) {
  if (result != rrSuccess) die(std::string(what) + ": " + rrGetLastError(comm));
}

Options parse(int argc, char** argv) {
  Options options;
  std::vector<int> ranks;
  rr::tools::CommandLine command_line("rr-gpu-allreduce-bench");
  CLI::App& app = command_line.app;
  app.add_option("--ranks", ranks)->delimiter(',')->check(CLI::Range(1, 4096));
  app.add_option("--min-mib", options.min_mib)->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--max-mib", options.max_mib)->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--iterations", options.iterations)->check(CLI::Range(1, 1 << 20));
  try {
    command_line.parse(argc, argv);
  } catch (const rr::tools::CommandLineError& e) {
    die(std::string(e.what()) + " (--ranks 2,4 --min-mib 1 --max-mib 1024 --iterations 5)");
  }
  if (!ranks.empty()) options.ranks = ranks;
  if (options.max_mib < options.min_mib) die("--max-mib is below --min-mib");
  return options;
}

using Clock = std::chrono::steady_clock;

// The slowest rank's median of `iterations` runs of `body`, in ms; every
// rank starts each run together (a host barrier).
template <typename Body>
double timed(rrComm_t comm, int iterations, Body&& body) {
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    check(rrBarrier(comm, nullptr), "rrBarrier", comm);
    const auto start = Clock::now();
    body();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  check(rrAllReduce(&median, &median, 1, rrFloat64, rrMax, comm, nullptr), "rrAllReduce of the times", comm);
  return median;
}

int run_rank(const Options& options, const rr::test::RankEnv& env) {
  check(cudaSetDevice(0), "cudaSetDevice(0)");
  rrComm_t comm = nullptr;
  check(rrCommInitUrl(&comm, env.url.c_str(), env.size, env.rank, nullptr), "rrCommInitUrl", nullptr);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const size_t max_bytes = options.max_mib << 20;
  void* device = nullptr;
  void* pinned = nullptr;
  check(cudaMalloc(&device, max_bytes), "cudaMalloc");
  check(cudaMemset(device, 0, max_bytes), "cudaMemset");
  check(cudaMallocHost(&pinned, max_bytes), "cudaMallocHost");
  std::memset(pinned, 0, max_bytes);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double ring_factor = 2.0 * (env.size - 1) / env.size;
  for (size_t mib = options.min_mib; mib <= options.max_mib; mib *= 4) {
    const size_t bytes = mib << 20;
    const size_t count = bytes / 4;
    // Warm-up: the first call also makes the staging slots.
    check(rrAllReduce(device, device, count, rrFloat32, rrSum, comm, stream), "rrAllReduce (device)", comm);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const double all = timed(comm, options.iterations, [&] {
      check(rrAllReduce(device, device, count, rrFloat32, rrSum, comm, stream), "rrAllReduce (device)", comm);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    const double d2h = timed(comm, options.iterations, [&] {
      check(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    const double host = timed(comm, options.iterations, [&] {
      check(rrAllReduce(pinned, pinned, count, rrFloat32, rrSum, comm, nullptr), "rrAllReduce (host)", comm);
    });
    const double h2d = timed(comm, options.iterations, [&] {
      check(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    rrResult_t async = rrSuccess;
    check(rrCommGetAsyncError(comm, &async), "rrCommGetAsyncError", comm);
    if (async != rrSuccess) die(std::string("asynchronous error: ") + rrGetLastError(comm));
    if (env.rank == 0) {
      const double algbw = static_cast<double>(bytes) / (all * 1e-3) / 1e9;
      std::printf("allreduce %d %zu %.3f %.2f %.2f %.3f %.3f %.3f %.3f %.3f\n", env.size, mib, all, algbw,
                  algbw * ring_factor, d2h, host, h2d, all / (d2h + host + h2d), all / std::max({d2h, host, h2d}));
      std::fflush(stdout);
    }
  }
  cudaFreeHost(pinned);
  cudaFree(device);
  check(rrCommDestroy(comm), "rrCommDestroy", nullptr);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  rr::test::RankEnv env;
  if (rr::test::this_is_a_rank(&env)) return run_rank(options, env);
  const int probed = rr::test::probe_gpu();
  if (probed != 0) return probed;
  char dir_template[] = "/tmp/rr-gpu-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) die("mkdtemp failed");
  std::printf("# kind ranks MiB time_ms algbw_GB/s busbw_GB/s d2h_ms host_ms h2d_ms overlap slowest\n");
  int failed = 0;
  for (int size : options.ranks) failed += rr::test::fork_exec_ranks(size, argv, dir, 1800);
  return failed == 0 ? 0 : 1;
}
