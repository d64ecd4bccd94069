// rr-gpu-bench: the CUDA reduction kernels (kernels/device_reduce.hpp) per
// dtype x op, beside the copies they are measured against: device-to-device
// cudaMemcpy (the HBM reference), and H2D / D2H / both at once from pinned
// host memory (the bus the staging path crosses). Also one received chunk in
// pinned host memory reduced into device memory two ways: an H2D copy then
// the reduction, or one kernel reading the mapped pinned chunk (the fused
// reduce-copy).
//
// Every figure is measured here with CUDA events: the median over --repeats
// runs of --iterations back-to-back calls on one stream, after two warm-up
// calls. Bandwidth counts bytes read + written for work inside the device
// (a copy moves 2 x size, a reduction 3 x size, a division 2 x size), and
// size once for work that crosses the bus (each byte crosses it once).
//
// Usage: rr-gpu-bench [--sizes-mib 64,256] [--iterations 20] [--repeats 5]
// Exits 77 when no GPU can be used.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/device_reduce.hpp"
#include "reduce/reduce.hpp"

#include "command_line.hpp"

namespace {

using rr::reduce::dtype_name;
using rr::reduce::dtype_size;
using rr::reduce::op_name;

void die(const std::string& what) {
  std::fprintf(stderr, "rr-gpu-bench: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(error));
}

void check(const rr::Status& status) {
  if (!status.ok()) die(status.message());
}

struct Options {
  std::vector<size_t> sizes_mib = {64, 256};
  int iterations = 20;
  int repeats = 5;
};

Options parse(int argc, char** argv) {
  Options options;
  bool help = false;
  std::vector<size_t> sizes_mib;
  rr::tools::CommandLine command_line("rr-gpu-bench");
  CLI::App& app = command_line.app;
  app.add_flag("-h,--help", help);
  app.add_option("--sizes-mib", sizes_mib)->delimiter(',')->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--iterations", options.iterations)->check(CLI::Range(1, 1 << 20));
  app.add_option("--repeats", options.repeats)->check(CLI::Range(1, 1 << 20));
  try {
    command_line.parse(argc, argv);
  } catch (const rr::tools::CommandLineError& e) {
    die(std::string(e.what()) + " (try --help)");
  }
  if (help) {
    std::printf("usage: rr-gpu-bench [--sizes-mib 64,256] [--iterations 20] [--repeats 5]\n");
    std::exit(0);
  }
  if (!sizes_mib.empty()) options.sizes_mib = sizes_mib;
  return options;
}

// RAII owners of what the benchmark allocates.
struct DeviceMemory {
  void* data = nullptr;
  explicit DeviceMemory(size_t bytes) { check(cudaMalloc(&data, bytes), "cudaMalloc"); }
  ~DeviceMemory() { cudaFree(data); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

struct PinnedMemory {
  void* data = nullptr;
  explicit PinnedMemory(size_t bytes) {
    check(cudaHostAlloc(&data, bytes, cudaHostAllocMapped), "cudaHostAlloc");
  }
  ~PinnedMemory() { cudaFreeHost(data); }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
};

struct Stream {
  cudaStream_t handle = nullptr;
  Stream() { check(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(handle); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Event {
  cudaEvent_t handle = nullptr;
  Event() { check(cudaEventCreate(&handle), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(handle); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// Seconds per call of enqueue(stream): the median over `repeats` runs of
// `iterations` calls between two events on `stream`. enqueue may fork other
// streams from `stream` as long as it joins them back.
template <typename Enqueue>
double seconds_per_call(const Options& options, cudaStream_t stream, Enqueue&& enqueue) {
  Event start, stop;
  for (int i = 0; i < 2; ++i) enqueue(stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> seconds;
  for (int r = 0; r < options.repeats; ++r) {
    check(cudaEventRecord(start.handle, stream), "cudaEventRecord");
    for (int i = 0; i < options.iterations; ++i) enqueue(stream);
    check(cudaEventRecord(stop.handle, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop.handle), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.handle, stop.handle), "cudaEventElapsedTime");
    seconds.push_back(ms / 1e3 / options.iterations);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

const rrDataType_t kDtypes[] = {rrInt8,    rrUint8,   rrInt32,   rrUint32,  rrInt64,
                                rrUint64,  rrFloat16, rrFloat32, rrFloat64, rrBfloat16};
// The bitwise ops run for the integer dtypes only (op_defined).
const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg, rrBand, rrBor, rrBxor};

// The rank count that avg's last step divides by here.
constexpr int kDivisor = 4;

void row(const char* kind, const std::string& name, size_t mib, double gbps, double ratio,
         const char* of) {
  if (of != nullptr) {
    std::printf("%-8s %-24s %6zu %10.1f %8.3f  %s\n", kind, name.c_str(), mib, gbps, ratio, of);
  } else {
    std::printf("%-8s %-24s %6zu %10.1f %8s  %s\n", kind, name.c_str(), mib, gbps, "-", "-");
  }
  std::fflush(stdout);
}

struct Worst {
  double ratio = 1e9;
  std::string name;
  std::vector<double> all;
  void add(double r, const std::string& n) {
    all.push_back(r);
    if (r < ratio) {
      ratio = r;
      name = n;
    }
  }
  double median() {
    std::sort(all.begin(), all.end());
    return all.empty() ? 0 : all[all.size() / 2];
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIP: no usable GPU (cudaGetDeviceCount: %s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "0 devices");
    return 77;
  }
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, 0), "cudaGetDeviceProperties");
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("# rr-gpu-bench: GPU 0 %s, compute capability %d.%d, %d multiprocessors, "
              "%.1f GiB; CUDA runtime %d, driver %d\n",
              props.name, props.major, props.minor, props.multiProcessorCount,
              props.totalGlobalMem / double(1 << 30), runtime, driver);
  std::printf("# median of %d runs of %d calls each (CUDA events); GB/s = 1e9 bytes/s: read + "
              "written inside the device (copy 2x, reduction 3x, division 2x the size), "
              "the size once across the bus\n",
              options.repeats, options.iterations);
  std::printf("%-8s %-24s %6s %10s %8s  %s\n", "kind", "name", "MiB", "GB/s", "ratio", "of");

  Stream stream, second;
  std::map<size_t, Worst> worst;  // [MiB] over every reduction
  std::map<size_t, std::pair<double, double>> bus;  // [MiB] h2d, d2h GB/s
  for (size_t mib : options.sizes_mib) {
    const size_t bytes = mib << 20;
    DeviceMemory a(bytes), b(bytes), dst(bytes), scratch(bytes);
    PinnedMemory host_in(bytes), host_out(bytes);
    check(cudaMemset(a.data, 0x3c, bytes), "cudaMemset");  // float32 ~0.0115, float16 ~1.06
    check(cudaMemset(b.data, 0x40, bytes), "cudaMemset");  // float32 ~3.0, float16 ~2.1
    std::memset(host_in.data, 0x3c, bytes);
    std::memset(host_out.data, 0, bytes);
    check(cudaDeviceSynchronize(), "cudaMemset");

    // The references.
    const double d2d = 2.0 * bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(cudaMemcpyAsync(dst.data, a.data, bytes, cudaMemcpyDeviceToDevice, s), "D2D copy");
    }) / 1e9;
    row("copy", "d2d", mib, d2d, 1.0, "d2d");
    const double h2d = bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(cudaMemcpyAsync(scratch.data, host_in.data, bytes, cudaMemcpyHostToDevice, s), "H2D");
    }) / 1e9;
    row("copy", "h2d_pinned", mib, h2d, 0, nullptr);
    const double d2h = bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(cudaMemcpyAsync(host_out.data, a.data, bytes, cudaMemcpyDeviceToHost, s), "D2H");
    }) / 1e9;
    row("copy", "d2h_pinned", mib, d2h, 0, nullptr);
    bus[mib] = {h2d, d2h};
    // Both directions at once (the staging pipeline's steady state), on two
    // streams forked from and joined back to the timed one.
    Event fork, join;
    const double both = 2.0 * bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(cudaEventRecord(fork.handle, s), "cudaEventRecord");
      check(cudaStreamWaitEvent(second.handle, fork.handle, 0), "cudaStreamWaitEvent");
      check(cudaMemcpyAsync(scratch.data, host_in.data, bytes, cudaMemcpyHostToDevice, s), "H2D");
      check(cudaMemcpyAsync(host_out.data, a.data, bytes, cudaMemcpyDeviceToHost, second.handle),
            "D2H");
      check(cudaEventRecord(join.handle, second.handle), "cudaEventRecord");
      check(cudaStreamWaitEvent(s, join.handle, 0), "cudaStreamWaitEvent");
    }) / 1e9;
    row("copy", "h2d+d2h_pinned", mib, both, 0, nullptr);

    // Every reduction: the ring's step (device_reduce) and, for avg, its last
    // step with the division (device_reduce_last).
    for (rrDataType_t dtype : kDtypes) {
      const size_t count = bytes / dtype_size(dtype);
      for (rrRedOp_t op : kOps) {
        if (!rr::reduce::op_defined(dtype, op)) continue;
        const double seconds = seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
          if (op == rrAvg) {
            check(rr::kernels::device_reduce_last(dst.data, a.data, b.data, count, dtype, op,
                                                  kDivisor, s));
          } else {
            check(rr::kernels::device_reduce(dst.data, a.data, b.data, count, dtype, op, s));
          }
        });
        const double gbps = 3.0 * bytes / seconds / 1e9;
        const std::string name = std::string(dtype_name(dtype)) + "." + op_name(op);
        row("reduce", name, mib, gbps, gbps / d2d, "d2d");
        worst[mib].add(gbps / d2d, name);
      }
      // avg when a rank reduces nothing (one rank): a division.
      const double seconds = seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
        check(rr::kernels::device_finish(dst.data, a.data, count, dtype, rrAvg, kDivisor, s));
      });
      const double gbps = 2.0 * bytes / seconds / 1e9;
      row("divide", std::string(dtype_name(dtype)) + ".avg", mib, gbps, gbps / d2d, "d2d");
    }

    // A received float32 chunk in pinned host memory, summed into device
    // memory: copy then reduce, or one kernel that reads the mapped chunk.
    const size_t count = bytes / sizeof(float);
    const double staged = bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(cudaMemcpyAsync(scratch.data, host_in.data, bytes, cudaMemcpyHostToDevice, s), "H2D");
      check(rr::kernels::device_reduce(dst.data, scratch.data, b.data, count, rrFloat32, rrSum, s));
    }) / 1e9;
    row("recv", "float32.sum.h2d+reduce", mib, staged, staged / h2d, "h2d");
    const double fused = bytes / seconds_per_call(options, stream.handle, [&](cudaStream_t s) {
      check(rr::kernels::device_reduce(dst.data, host_in.data, b.data, count, rrFloat32, rrSum, s));
    }) / 1e9;
    row("recv", "float32.sum.mapped", mib, fused, fused / h2d, "h2d");
  }

  // One line per size for check.sh's table.
  for (auto& [mib, w] : worst) {
    std::printf("summary  %zu MiB: reductions median %.3f of d2d, lowest %.3f (%s); "
                "h2d %.1f GB/s, d2h %.1f GB/s\n",
                mib, w.median(), w.ratio, w.name.c_str(), bus[mib].first, bus[mib].second);
  }
  return 0;
}
