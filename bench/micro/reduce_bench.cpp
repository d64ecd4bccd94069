// Host reduction throughput: reduce() of 16 MiB out of place for every
// dtype x op, against memcpy of the same size, the machine's physical
// reference. Bytes processed count memory traffic: reduce reads two buffers
// and writes one (3x), memcpy reads one and writes one (2x), so GB/s compare
// like with like.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reduce/half.hpp"
#include "reduce/reduce.hpp"

namespace {

constexpr size_t kBytes = size_t{16} << 20;

// Buffers of ordinary values (no NaN, inf or subnormals, which some CPUs
// handle slowly) that keep products finite; filling them also faults the
// pages in before timing.
void fill(std::vector<unsigned char>& buffer, rrDataType_t dtype, double value) {
  const size_t count = kBytes / rr::reduce::dtype_size(dtype);
  unsigned char* p = buffer.data();
  for (size_t i = 0; i < count; ++i) {
    double v = value + static_cast<double>(i % 7) * 0.125;
    switch (dtype) {
      case rrInt8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(i); break;
      case rrUint8: p[i] = static_cast<uint8_t>(i); break;
      case rrInt32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(i); break;
      case rrUint32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(i); break;
      case rrInt64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(i); break;
      case rrUint64: reinterpret_cast<uint64_t*>(p)[i] = i; break;
      case rrFloat16:
        reinterpret_cast<uint16_t*>(p)[i] = rr::float_to_half_bits(static_cast<float>(v));
        break;
      case rrFloat32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
      case rrFloat64: reinterpret_cast<double*>(p)[i] = v; break;
      case rrBfloat16:
        reinterpret_cast<uint16_t*>(p)[i] = rr::float_to_bfloat16_bits(static_cast<float>(v));
        break;
      default: break;
    }
  }
}

void BM_reduce(benchmark::State& state, rrDataType_t dtype, rrRedOp_t op, bool allow_f16c) {
  std::vector<unsigned char> a(kBytes), b(kBytes), dst(kBytes);
  fill(a, dtype, 1.0);
  fill(b, dtype, 0.5);
  fill(dst, dtype, 0.0);
  const size_t count = kBytes / rr::reduce::dtype_size(dtype);
  rr::reduce::allow_f16c(allow_f16c);
  for (auto _ : state) {
    rr::reduce::reduce(dst.data(), a.data(), b.data(), count, dtype, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  rr::reduce::allow_f16c(true);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * kBytes);
}

void BM_memcpy(benchmark::State& state) {
  std::vector<unsigned char> src(kBytes, 1), dst(kBytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBytes);
}

bool register_benchmarks() {
  benchmark::RegisterBenchmark("memcpy/16MiB", BM_memcpy);
  for (int dtype = 0; dtype < rrNumTypes; ++dtype) {
    for (int op = 0; op < rrNumOps; ++op) {
      auto d = static_cast<rrDataType_t>(dtype);
      auto o = static_cast<rrRedOp_t>(op);
      if (!rr::reduce::op_defined(d, o)) continue;  // bitwise ops: integer types only
      std::string name = std::string("reduce/") + rr::reduce::dtype_name(d) + "_" +
                         rr::reduce::op_name(o) + "/16MiB";
      benchmark::RegisterBenchmark(name.c_str(), BM_reduce, d, o, true);
      // float16 also without F16C: the portable loops other CPUs run.
      if (d == rrFloat16 && rr::reduce::float16_uses_f16c()) {
        name = std::string("reduce/float16_") + rr::reduce::op_name(o) + "_portable/16MiB";
        benchmark::RegisterBenchmark(name.c_str(), BM_reduce, d, o, false);
      }
    }
  }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
