// rr-allreduce-bench: allreduce throughput of ringreduce across message sizes,
// in nccl-tests' terms (algbw = bytes / time, busbw = algbw x 2(N-1)/N), beside
// this machine's single-thread memcpy bandwidth and the busbw the memory
// traffic allows (rrbench/machine_rates.h), both measured in the same run.
// Run it under rr-run or any launcher that sets the env:// variables:
//   rr-run -n 4 rr-allreduce-bench -b 1K -e 256M -f 4

#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "machine_rates.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  size_t min_bytes = 1024;
  size_t max_bytes = size_t{256} << 20;
  size_t factor = 4;
  int iters = 20;
  int warmup = 3;
  bool check = true;
};

constexpr const char* kUsage =
    "usage: rr-allreduce-bench [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c 0|1]\n"
    "  sizes take K, M, G suffixes (default 1K to 256M, factor 4); 20 iterations after 3; float32\n"
    "  sum; run under rr-run -n N\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "rr-allreduce-bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

size_t parse_size(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  size_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1 << 10, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1 << 20, ++end;
  else if (*end == 'G' || *end == 'g') scale = size_t{1} << 30, ++end;
  if (end == text.c_str() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
    usage(flag + " takes a size such as 4096, 64K or 32M, not '" + text + "'");
  }
  return static_cast<size_t>(v * static_cast<double>(scale));
}

Options parse(int argc, char** argv) {
  Options o;
  std::string min_bytes, max_bytes;
  rr::tools::CommandLine command_line("rr-allreduce-bench");
  CLI::App& app = command_line.app;
  app.add_option("-b,--minbytes", min_bytes);
  app.add_option("-e,--maxbytes", max_bytes);
  app.add_option("-f,--stepfactor", o.factor)->check(CLI::Range(size_t{2}, size_t{1} << 20));
  app.add_option("-n,--iters", o.iters)->check(CLI::Range(1, 1 << 30));
  app.add_option("-w,--warmup_iters", o.warmup)->check(CLI::Range(0, 1 << 30));
  app.add_option("-c,--check", o.check);
  command_line.parse_or_exit(argc, argv, kUsage);
  if (command_line.given("-b")) o.min_bytes = parse_size("-b", min_bytes);
  if (command_line.given("-e")) o.max_bytes = parse_size("-e", max_bytes);
  if (o.min_bytes > o.max_bytes) usage("-b is larger than -e");
  return o;
}

void check_rr(rrResult_t r, rrComm_t comm, const char* what) {
  if (r != rrSuccess) {
    std::fprintf(stderr, "%s failed: %s: %s\n", what, rrGetErrorString(r), rrGetLastError(comm));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  rrComm_t comm = nullptr;
  check_rr(rrCommInitFromEnv(&comm), nullptr, "rrCommInitFromEnv");
  int rank = 0, nranks = 0;
  check_rr(rrCommUserRank(comm, &rank), comm, "rrCommUserRank");
  check_rr(rrCommCount(comm, &nranks), comm, "rrCommCount");

  // Measured by rank 0 before the sweep while the others wait in the first
  // allreduce: the physical reference for shared-memory busbw.
  double memcpy_bw = 0;
  if (rank == 0) memcpy_bw = rrbench::measure_memcpy_gbps() * 1e9;
  float token = 0;
  check_rr(rrAllReduce(&token, &token, 1, rrFloat32, rrSum, comm, nullptr), comm, "rrAllReduce");
  // Then every rank at once (the allreduce of a token is the barrier); the
  // slowest rank's rates price the bound.
  const rr::algo::MachineRates mine = rrbench::measure_rates_at_once(
      [&] { check_rr(rrAllReduce(&token, &token, 1, rrFloat32, rrSum, comm, nullptr), comm, "rrAllReduce"); });
  double seconds_per_byte[2] = {1 / mine.copy_bytes_per_s, 1 / mine.reduce_bytes_per_s};
  check_rr(rrAllReduce(seconds_per_byte, seconds_per_byte, 2, rrFloat64, rrMax, comm, nullptr), comm, "rrAllReduce");
  rr::algo::MachineRates rates;
  rates.copy_bytes_per_s = 1 / seconds_per_byte[0];
  rates.reduce_bytes_per_s = 1 / seconds_per_byte[1];

  const size_t max_count = o.max_bytes / sizeof(float);
  std::vector<float> send(std::max<size_t>(max_count, 1)), recv(std::max<size_t>(max_count, 1));
  const double factor = 2.0 * (nranks - 1) / nranks;
  if (rank == 0) {
    std::printf("# ringreduce allreduce, float32 sum, %d ranks, %d iterations (+%d warm-up)\n", nranks, o.iters, o.warmup);
    std::printf("# single-thread memcpy bandwidth: %.2f GB/s\n", memcpy_bw / 1e9);
    std::printf("# every rank at once: copying %.2f GB/s, reducing %.2f GB/s each (the slowest rank's); bus/bound = "
                "busbw / the busbw that memory traffic allows (docs/algorithms.md, \"Memory traffic on one host\")\n",
                rates.copy_bytes_per_s / 1e9, rates.reduce_bytes_per_s / 1e9);
    std::printf("# %12s %12s %12s %10s %10s %8s %9s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "bus/cpy",
                "bus/bound", "#wrong");
  }
  double bus_sum = 0;
  int rows = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const size_t count = bytes / sizeof(float);
    // Small integers: the sum is exact in float32, so the check is exact.
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i + static_cast<size_t>(rank)) % 7);
    for (int i = 0; i < o.warmup; ++i) {
      check_rr(rrAllReduce(send.data(), recv.data(), count, rrFloat32, rrSum, comm, nullptr), comm, "rrAllReduce");
    }
    check_rr(rrAllReduce(&token, &token, 1, rrFloat32, rrSum, comm, nullptr), comm, "rrAllReduce");
    auto t0 = Clock::now();
    for (int i = 0; i < o.iters; ++i) {
      check_rr(rrAllReduce(send.data(), recv.data(), count, rrFloat32, rrSum, comm, nullptr), comm, "rrAllReduce");
    }
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count() / o.iters;
    // Report the slowest rank's time, as nccl-tests does.
    double slowest = seconds;
    check_rr(rrAllReduce(&seconds, &slowest, 1, rrFloat64, rrMax, comm, nullptr), comm, "rrAllReduce");
    double wrong = 0;
    if (o.check) {
      for (size_t i = 0; i < count; ++i) {
        double expect = 0;
        for (int r = 0; r < nranks; ++r) expect += static_cast<double>((i + static_cast<size_t>(r)) % 7);
        if (recv[i] != expect) ++wrong;
      }
      check_rr(rrAllReduce(&wrong, &wrong, 1, rrFloat64, rrSum, comm, nullptr), comm, "rrAllReduce");
    }
    const double algbw = bytes / slowest / 1e9;
    const double busbw = algbw * factor;
    if (rank == 0) {
      const double bound = rrbench::allreduce_bound_busbw(bytes, nranks, rates);
      std::printf("  %12zu %12zu %12.1f %10.3f %10.3f %8.3f %9.3f %8.0f\n", bytes, count, slowest * 1e6, algbw, busbw,
                  busbw * 1e9 / memcpy_bw, bound > 0 ? busbw / bound : 0.0, wrong);
      std::fflush(stdout);
    }
    bus_sum += busbw;
    ++rows;
    if (wrong != 0) {
      if (rank == 0) std::fprintf(stderr, "rr-allreduce-bench: %.0f wrong elements at %zu bytes\n", wrong, bytes);
      rrCommDestroy(comm);
      return 1;
    }
  }
  if (rank == 0) std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? bus_sum / rows : 0.0);
  check_rr(rrCommDestroy(comm), nullptr, "rrCommDestroy");
  return 0;
}
