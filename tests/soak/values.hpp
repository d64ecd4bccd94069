#pragma once
// The soak's data: every input element is a function of (input key, element
// index), where the key is a function of (seed, call index, world rank), so
// every rank can make every rank's input and check its own output without
// asking anyone. The public C API's ten types only: float16 and bfloat16 are
// converted here (round to nearest even), not with the engine's helpers.
//
// Inputs of reductions are chosen so that no reduction overflows: floats in
// [-100, 100), prod in [0.5, 1.5) (a product of N of them stays far from the
// type's range for any rank count that fits a host). Integers take all their
// bits: sums and products wrap (the engine's integer arithmetic is modular),
// avg is the wrapped sum divided, truncating toward zero, as NCCL defines it.
// Inputs of data movement (broadcast, gathers, scatters, all-to-all,
// point-to-point) are random bits of the element's width, compared bit for bit.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ringreduce/ringreduce.h"

namespace soak {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// splitmix64's finalizer: a well-mixed 64-bit value from any 64-bit input.
constexpr uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of one rank's input to one call.
constexpr uint64_t input_key(uint64_t seed, uint64_t call, int world_rank) {
  return mix(mix(seed ^ mix(call)) + static_cast<uint64_t>(world_rank) * 0xD1B54A32D192ED03ull);
}

// 64 random bits for element i of the input with this key.
constexpr uint64_t raw(uint64_t key, size_t i) { return mix(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull); }

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t biased = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (biased == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  const int exponent = static_cast<int>(biased) - 127 + 15;
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exponent <= 0) {  // a subnormal half, or zero
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    uint32_t h = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  const uint32_t x = exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13))
                                    : (sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_bits_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bfloat16_bits_to_float(v.bits);
  } else {
    return static_cast<double>(v);
  }
}

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{float_to_half_bits(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{float_to_bfloat16_bits(static_cast<float>(v))};
  } else {
    return static_cast<T>(v);
  }
}

// The unit in the last place at 1: the relative rounding of one operation.
template <typename T>
constexpr double kEpsilon = std::is_same_v<T, Half>       ? 0x1.0p-10
                            : std::is_same_v<T, BFloat16> ? 0x1.0p-7
                            : std::is_same_v<T, float>    ? 0x1.0p-23
                                                          : 0x1.0p-52;

// Element i of a reduction input with this key (see the ranges above).
template <typename T>
T reduction_input(uint64_t key, size_t i, rrRedOp_t op) {
  const uint64_t r = raw(key, i);
  if constexpr (kIsFloat<T>) {
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    return from_double<T>(op == rrProd ? 0.5 + unit : -100.0 + 200.0 * unit);
  } else {
    return static_cast<T>(r);
  }
}

// Calls f(T{}) with the C++ type of dtype (Half and BFloat16 for the 16-bit floats).
template <typename F>
void with_dtype(rrDataType_t dtype, F&& f) {
  switch (dtype) {
    case rrInt8: f(int8_t{}); break;
    case rrUint8: f(uint8_t{}); break;
    case rrInt32: f(int32_t{}); break;
    case rrUint32: f(uint32_t{}); break;
    case rrInt64: f(int64_t{}); break;
    case rrUint64: f(uint64_t{}); break;
    case rrFloat16: f(Half{}); break;
    case rrBfloat16: f(BFloat16{}); break;
    case rrFloat32: f(float{}); break;
    case rrFloat64: f(double{}); break;
    default: break;
  }
}

// Calls f(U{}) with the unsigned integer of the element's width: data movement
// compares bits.
template <typename F>
void with_width(size_t elem, F&& f) {
  switch (elem) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

inline bool is_float(rrDataType_t dtype) {
  return dtype == rrFloat16 || dtype == rrBfloat16 || dtype == rrFloat32 || dtype == rrFloat64;
}

inline size_t dtype_size(rrDataType_t dtype) {
  switch (dtype) {
    case rrInt8:
    case rrUint8: return 1;
    case rrFloat16:
    case rrBfloat16: return 2;
    case rrInt32:
    case rrUint32:
    case rrFloat32: return 4;
    default: return 8;
  }
}

const char* dtype_name(rrDataType_t dtype);
const char* op_name(rrRedOp_t op);

}  // namespace soak
