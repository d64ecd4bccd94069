#pragma once
// Reproducible inputs and double-precision references for collectives of
// every dtype x op, written once per element type (reduce/with_dtype.hpp).
// Every rank can make every rank's input, so each checks its own result.
// Used by the collectives and staging pipeline's tests (tests/integration)
// and the GPU tests.
//
// Inputs are exactly representable in their type: floats in [-100, 100)
// (prod: [0.5, 1.5), so many ranks neither overflow nor underflow), the full
// range of 8-bit integers (sums and products wrap), bounded ranges of wider ones.
// References: integers exactly, with the type's wrap-around (avg: the wrapped
// sum divided, truncating, as NCCL; band, bor, bxor on the two's complement
// bits); floats in double, within the rounding a
// ring of N ranks may add (N + 1 roundings of the sum's magnitude).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "integer_fold.hpp"

#include "reduce/half.hpp"
#include "reduce/with_dtype.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::test {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// float16 converts in hardware where the tests are built with F16C
// (tests/meson.build, where the building machine has it): the references
// then share no conversion code with the library they check, and cost a
// quarter of the software conversions' time (bench/RESULTS.md, "Test time").
template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__F16C__)
    return static_cast<double>(_cvtsh_ss(v.bits));
#else
    return static_cast<double>(to_float(v));
#endif
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return static_cast<double>(to_float(v));
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__F16C__)
    return Half{static_cast<uint16_t>(_cvtss_sh(static_cast<float>(v), _MM_FROUND_TO_NEAREST_INT))};
#else
    return to_half(static_cast<float>(v));
#endif
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// splitmix64 of (seed, rank, i): an independent value per element.
inline uint64_t mix(uint64_t seed, int rank, size_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) << 40) ^ i;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
T input(rrRedOp_t op, int rank, size_t i, uint64_t seed) {
  const uint64_t r = mix(seed, rank, i);
  if constexpr (kIsFloat<T>) {
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    return from_double<T>(op == rrProd ? 0.5 + unit : -100.0 + 200.0 * unit);
  } else if constexpr (sizeof(T) == 1) {
    return static_cast<T>(r);
  } else if constexpr (std::is_signed_v<T> && sizeof(T) == 8) {
    // Beyond int32, so a sum folded in 32 bits is caught; products of three wrap.
    return static_cast<T>(static_cast<int64_t>(r % 2000000001) - 1000000000);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(r % 2000001) - 1000000);
  } else {
    return static_cast<T>(r % 4000000000u);
  }
}

// The reduction over `ranks` ranks of input element `i`; *tolerance is how
// far a correct result may be from it (0: exact).
template <typename T>
double reference(rrRedOp_t op, int ranks, size_t i, uint64_t seed, double* tolerance) {
  *tolerance = 0;
  if constexpr (kIsFloat<T>) {
    double acc = to_double(input<T>(op, 0, i, seed));
    double sum_abs = std::fabs(acc);
    for (int r = 1; r < ranks; ++r) {
      const double x = to_double(input<T>(op, r, i, seed));
      sum_abs += std::fabs(x);
      if (op == rrSum || op == rrAvg) acc += x;
      if (op == rrProd) acc *= x;
      if (op == rrMax) acc = std::max(acc, x);
      if (op == rrMin) acc = std::min(acc, x);
    }
    const double epsilon = std::is_same_v<T, Half>       ? 0x1.0p-10
                           : std::is_same_v<T, BFloat16> ? 0x1.0p-7
                           : std::is_same_v<T, float>    ? 0x1.0p-23
                                                         : 0x1.0p-52;
    if (op == rrAvg) acc /= ranks, sum_abs /= ranks;
    if (op == rrSum || op == rrAvg) *tolerance = (ranks + 1) * epsilon * sum_abs;
    if (op == rrProd) *tolerance = (ranks + 1) * epsilon * std::fabs(acc) * 1.01;
    return acc;
  } else {
    return static_cast<double>(fold_integers<T>(op, ranks, [&](int r) { return input<T>(op, r, i, seed); }));
  }
}

// buf[k] = rank's input element first + k, for k < count.
inline void fill(rrDataType_t dtype, rrRedOp_t op, int rank, uint64_t seed, void* buf, size_t first, size_t count) {
  reduce::with_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < count; ++k) static_cast<T*>(buf)[k] = input<T>(op, rank, first + k, seed);
  });
}

// How many of out[k], k < count, are not the reduction over `ranks` of input
// element first + k; the first few are described in *report.
inline size_t count_wrong(rrDataType_t dtype, rrRedOp_t op, int ranks, uint64_t seed, const void* out, size_t first,
                          size_t count, std::string* report) {
  size_t wrong = 0;
  reduce::with_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < count; ++k) {
      const T got = static_cast<const T*>(out)[k];
      if constexpr (kIsFloat<T>) {
        double tolerance = 0;
        const double expect = reference<T>(op, ranks, first + k, seed, &tolerance);
        if (!(std::fabs(to_double(got) - expect) <= tolerance) && wrong++ < 5) {
          *report += "element " + std::to_string(first + k) + ": got " + std::to_string(to_double(got)) +
                     ", expected " + std::to_string(expect) + " +- " + std::to_string(tolerance) + "\n";
        }
      } else {
        // In the type, every bit: a double would round 64-bit products.
        const T expect = fold_integers<T>(op, ranks, [&](int r) { return input<T>(op, r, first + k, seed); });
        if (got != expect && wrong++ < 5) {
          *report += "element " + std::to_string(first + k) + ": got " + std::to_string(got) + ", expected " +
                     std::to_string(expect) + "\n";
        }
      }
    }
  });
  return wrong;
}

// How many of out[k], k < count, differ from `rank`'s input element first + k.
inline size_t count_not_input(rrDataType_t dtype, rrRedOp_t op, int rank, uint64_t seed, const void* out,
                              size_t first, size_t count, std::string* report) {
  size_t wrong = 0;
  reduce::with_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t k = 0; k < count; ++k) {
      const double expect = to_double(input<T>(op, rank, first + k, seed));
      const double got = to_double(static_cast<const T*>(out)[k]);
      if (got != expect && wrong++ < 5) {
        *report += "rank " + std::to_string(rank) + " element " + std::to_string(first + k) + ": got " +
                   std::to_string(got) + ", expected " + std::to_string(expect) + "\n";
      }
    }
  });
  return wrong;
}

}  // namespace rr::test
