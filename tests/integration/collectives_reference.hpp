#pragma once
// collectives_test's inputs and references: element i of rank r's input for
// every dtype, and the reduction over every rank's input computed in double
// (exact integer arithmetic, with the wrap-around of the type, for integers).
//
// Inputs are random but reproducible: every rank can generate every rank's
// input (splitmix64 of the seed, the rank and the index), so each checks its
// result without trusting the library. Each dtype's loops are compiled for
// its storage type (with_type below picks it once per call), so generating
// and checking millions of elements costs a few nanoseconds each: the
// suites spend their time on collectives, not on references.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives_env.hpp"
#include "reduce/half.hpp"

namespace collectives_reference {

inline const rrDataType_t kTypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64,
                                      rrFloat16, rrBfloat16, rrFloat32, rrFloat64};
inline const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg};

inline size_t type_size(rrDataType_t t) {
  switch (t) {
    case rrInt8: case rrUint8: return 1;
    case rrFloat16: case rrBfloat16: return 2;
    case rrInt32: case rrUint32: case rrFloat32: return 4;
    default: return 8;
  }
}
inline bool is_float(rrDataType_t t) {
  return t == rrFloat16 || t == rrBfloat16 || t == rrFloat32 || t == rrFloat64;
}
inline const char* type_name(rrDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"};
  return names[t];
}
inline const char* op_name(rrRedOp_t o) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[o];
}

// Calls f with a value of `t`'s storage type (its value unused).
template <class F>
decltype(auto) with_type(rrDataType_t t, F&& f) {
  switch (t) {
    case rrInt8: return f(int8_t{});
    case rrUint8: return f(uint8_t{});
    case rrInt32: return f(int32_t{});
    case rrUint32: return f(uint32_t{});
    case rrInt64: return f(int64_t{});
    case rrUint64: return f(uint64_t{});
    case rrFloat16: return f(rr::Half{});
    case rrBfloat16: return f(rr::BFloat16{});
    case rrFloat32: return f(float{});
    default: return f(double{});
  }
}

template <class S>
constexpr bool kIsFloat = std::is_floating_point<S>::value || std::is_same<S, rr::Half>::value ||
                          std::is_same<S, rr::BFloat16>::value;

template <class S>
double as_double(S s) {
  if constexpr (std::is_same<S, rr::Half>::value || std::is_same<S, rr::BFloat16>::value) {
    return rr::to_float(s);
  } else {
    return static_cast<double>(s);
  }
}

// splitmix64's first output for (seed, rank, i): an independent stream per
// element at the cost of a few multiplies.
inline uint64_t input_bits(uint64_t seed, int rank, size_t i) {
  uint64_t z = (seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) << 40) ^ i) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Element `i` of `rank`'s input in its storage type.
template <class S>
S input_as(rrRedOp_t op, int rank, size_t i, uint64_t seed) {
  const uint64_t bits = input_bits(seed, rank, i);
  if constexpr (kIsFloat<S>) {
    // prod: near 1 so many ranks neither overflow nor underflow.
    const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
    const double v = op == rrProd ? 0.5 + unit : -100.0 + 200.0 * unit;
    if constexpr (std::is_same<S, rr::Half>::value) {
      return rr::to_half(static_cast<float>(v));
    } else if constexpr (std::is_same<S, rr::BFloat16>::value) {
      return rr::BFloat16{rr::float_to_bfloat16_bits(static_cast<float>(v))};
    } else {
      return static_cast<S>(v);
    }
  } else if constexpr (sizeof(S) == 1) {
    // The full range of small types (so sums and products wrap), a bounded
    // signed range of large ones.
    return static_cast<S>(bits);
  } else if constexpr (std::is_same<S, int32_t>::value) {
    return static_cast<int32_t>(bits % 2000001) - 1000000;
  } else if constexpr (std::is_same<S, int64_t>::value) {
    return static_cast<int64_t>(bits % 2000000001) - 1000000000;
  } else {
    return static_cast<S>(bits % 4000000000u);
  }
}

// Element `i` of `rank`'s input as a double, exactly representable in the type.
inline double input_value(rrDataType_t t, rrRedOp_t op, int rank, size_t i, uint64_t seed) {
  return with_type(t, [&](auto s) { return as_double(input_as<decltype(s)>(op, rank, i, seed)); });
}

// Writes elements [first, first + count) of `rank`'s input to `buf`.
inline void fill_input(rrDataType_t t, rrRedOp_t op, int rank, uint64_t seed, void* buf, size_t first, size_t count) {
  with_type(t, [&](auto s) {
    using S = decltype(s);
    S* out = static_cast<S*>(buf);
    for (size_t k = 0; k < count; ++k) out[k] = input_as<S>(op, rank, first + k, seed);
  });
}

// Whether buf[k] is element first + k of `rank`'s input for every k < count;
// the first wrong ones are reported (ADD_FAILURE) under `what`.
inline bool check_input(rrDataType_t t, rrRedOp_t op, int rank, uint64_t seed, const void* buf, size_t first,
                        size_t count, const std::string& what) {
  return with_type(t, [&](auto s) {
    using S = decltype(s);
    const S* in = static_cast<const S*>(buf);
    size_t wrong = 0;
    for (size_t k = 0; k < count; ++k) {
      const double got = as_double(in[k]), expect = as_double(input_as<S>(op, rank, first + k, seed));
      if (got != expect && wrong++ < 5) {
        ADD_FAILURE() << what << " element " << first + k << ": got " << got << ", expected " << expect;
      }
    }
    EXPECT_EQ(wrong, 0u) << what;
    return wrong == 0;
  });
}

inline void store(rrDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case rrInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case rrUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case rrInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case rrUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case rrInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case rrUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case rrFloat16: static_cast<rr::Half*>(buf)[i] = rr::to_half(static_cast<float>(v)); break;
    case rrBfloat16: static_cast<rr::BFloat16*>(buf)[i] = rr::BFloat16{rr::float_to_bfloat16_bits(static_cast<float>(v))}; break;
    case rrFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(buf)[i] = v; break;
  }
}

inline double load(rrDataType_t t, const void* buf, size_t i) {
  return with_type(t, [&](auto s) { return as_double(static_cast<const decltype(s)*>(buf)[i]); });
}

template <class S>
double epsilon() {
  if constexpr (std::is_same<S, rr::Half>::value) return std::ldexp(1.0, -10);
  if constexpr (std::is_same<S, rr::BFloat16>::value) return std::ldexp(1.0, -7);
  if constexpr (std::is_same<S, float>::value) return std::ldexp(1.0, -23);
  return std::ldexp(1.0, -52);
}

// Integer reference of element `i` over `ranks` inputs: exact modular
// arithmetic in the type's width, then (for avg) C++'s truncating division of
// that value.
template <class S>
S int_reference(rrRedOp_t op, int ranks, size_t i, uint64_t seed) {
  using U = typename std::make_unsigned<S>::type;
  const S first = input_as<S>(op, 0, i, seed);
  U acc = static_cast<U>(first);
  S best = first;
  for (int r = 1; r < ranks; ++r) {
    const S x = input_as<S>(op, r, i, seed);
    if (op == rrSum || op == rrAvg) acc = static_cast<U>(acc + static_cast<U>(x));
    if (op == rrProd) acc = static_cast<U>(static_cast<uint64_t>(acc) * static_cast<U>(x));
    if (op == rrMax) best = std::max(best, x);
    if (op == rrMin) best = std::min(best, x);
  }
  if (op == rrMax || op == rrMin) return best;
  const S wrapped = static_cast<S>(acc);
  if (op == rrAvg) {
    if constexpr (std::is_signed<S>::value) {
      return static_cast<S>(static_cast<int64_t>(wrapped) / static_cast<int64_t>(ranks));
    } else {
      return static_cast<S>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(ranks));
    }
  }
  return wrapped;
}

// The reduction over every rank's input element `i` for floating types, and
// how far a correct result may be from it (0 for max and min).
template <class S>
double float_reference(rrRedOp_t op, int ranks, size_t i, uint64_t seed, double* tolerance) {
  double expect = as_double(input_as<S>(op, 0, i, seed));
  double sum_abs = std::fabs(expect);
  for (int r = 1; r < ranks; ++r) {
    const double x = as_double(input_as<S>(op, r, i, seed));
    sum_abs += std::fabs(x);
    if (op == rrSum || op == rrAvg) expect += x;
    if (op == rrProd) expect *= x;
    if (op == rrMax) expect = std::max(expect, x);
    if (op == rrMin) expect = std::min(expect, x);
  }
  if (op == rrAvg) expect /= ranks, sum_abs /= ranks;
  // Max and min pick an input: exact. Sum, avg and prod round once per
  // ring step (N - 1 times) and once more at the end.
  *tolerance = 0;
  if (op == rrSum || op == rrAvg) *tolerance = (ranks + 1) * epsilon<S>() * sum_abs;
  if (op == rrProd) *tolerance = (ranks + 1) * epsilon<S>() * std::fabs(expect) * 1.01;
  return expect;
}

// Checks out[k] against the reduction of input element first + k over the
// communicator's ranks, k < count. Returns whether all were right.
inline bool check_reduced(rrDataType_t t, rrRedOp_t op, const void* out, size_t first, size_t count, uint64_t seed) {
  const int ranks = collectives_env::g_size;
  return with_type(t, [&](auto s) {
    using S = decltype(s);
    const S* got = static_cast<const S*>(out);
    size_t wrong = 0;
    for (size_t k = 0; k < count; ++k) {
      if constexpr (kIsFloat<S>) {
        double tolerance = 0;
        const double expect = float_reference<S>(op, ranks, first + k, seed, &tolerance);
        const double g = as_double(got[k]);
        if (!(std::fabs(g - expect) <= tolerance) && wrong++ < 5) {
          ADD_FAILURE() << "element " << first + k << ": got " << g << ", expected " << expect << " +- " << tolerance;
        }
      } else {
        // Compared in the type, every bit (a double would round 64-bit products).
        const S expect = int_reference<S>(op, ranks, first + k, seed);
        if (got[k] != expect && wrong++ < 5) {
          ADD_FAILURE() << "element " << first + k << ": got " << +got[k] << ", expected " << +expect;
        }
      }
    }
    EXPECT_EQ(wrong, 0u);
    return wrong == 0;
  });
}

}  // namespace collectives_reference
