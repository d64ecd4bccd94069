#pragma once
// 16-bit floating storage types and their exact conversions to and from float.
//
// Half is IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits); BFloat16
// is the upper half of a binary32 (1, 8, 7). Arithmetic on either happens in
// float: widen exactly, compute, round once back to nearest-even.
//
// The code is shared with the CUDA kernels (kernels/), so it is plain integer
// and float arithmetic: no library calls, no branches on the data (a select
// vectorizes, a branch does not), and it does not depend on the rounding of
// float subnormals, so it gives the same bits with FTZ/DAZ set.
//
// NaN: every NaN is returned quiet with its sign and as much payload as fits,
// exactly what x86 F16C (vcvtph2ps / vcvtps2ph) and GCC's _Float16 do, so the
// F16C fast path in reduce.cpp and this portable code agree bit for bit.
// bfloat16 -> float is a plain shift (exact, a signalling NaN stays
// signalling); float -> bfloat16 quiets NaNs.

#include <cstdint>

#if defined(__CUDACC__)
#define RR_HOST_DEVICE __host__ __device__
#else
#define RR_HOST_DEVICE
#endif

namespace rr {

struct Half {
  uint16_t bits;
};

struct BFloat16 {
  uint16_t bits;
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage types must be 2 bytes");

RR_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

RR_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// c ? a : b as bit arithmetic. With ?: GCC sinks the float operation of the
// untaken side into a branch, and (floats may trap) then will not vectorize
// the loop on targets without masked vectors (AVX2, SSE2).
RR_HOST_DEVICE inline uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
  uint32_t mask = 0u - uint32_t(c);
  return (a & mask) | (b & ~mask);
}

// binary16 -> binary32, exact for every input.
RR_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
  constexpr uint32_t kExpMask = 0x7c00u << 13;   // half exponent field, moved to float's place
  uint32_t magnitude = uint32_t(h & 0x7fffu) << 13;
  uint32_t exponent = magnitude & kExpMask;
  uint32_t normal = magnitude + ((127u - 15u) << 23);  // rebias the exponent
  // Inf/NaN: the exponent field must become all ones; a NaN also gets the quiet bit.
  uint32_t special = (normal + ((128u - 16u) << 23)) | ((h & 0x3ffu) != 0 ? 0x00400000u : 0u);
  // Zero/subnormal: read the mantissa as a float with exponent 2^-14 (exact),
  // subtract the implicit leading one (2^-14) exactly.
  uint32_t subnormal = float_bits(bits_float(normal + (1u << 23)) - bits_float(113u << 23));
  uint32_t result =
      select_bits(exponent == kExpMask, special, select_bits(exponent == 0, subnormal, normal));
  return bits_float(result | (uint32_t(h & 0x8000u) << 16));
}

// binary32 -> binary16, round to nearest even; overflow gives inf, tiny values
// give subnormals or zero; NaN stays NaN.
RR_HOST_DEVICE inline uint16_t float_to_half_bits(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // Normal result: rebias, then round the 13 dropped bits to nearest even
  // (0xfff + the lowest kept bit); a carry rolls into the exponent, up to inf.
  uint32_t odd = (u >> 13) & 1u;
  uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + odd) >> 13;
  // Subnormal result (|f| < 2^-14): adding 0.5 puts the half's 2^-24 unit in
  // float's last mantissa bit, so the float adder rounds to nearest even for
  // us; the mantissa bits then are the half's bits.
  constexpr uint32_t kHalfOne = 126u << 23;  // 0.5f
  uint32_t subnormal = float_bits(bits_float(u) + bits_float(kHalfOne)) - kHalfOne;
  // |f| >= 2^16 (143 << 23), inf and NaN: inf, or NaN with the top payload
  // bits. Finite values from 65520 (halfway above 65504) up to 2^16 reach inf
  // through the normal path's rounding carry.
  uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);
  uint32_t special = u > 0x7f800000u ? nan : 0x7c00u;
  uint32_t result =
      select_bits(u >= (143u << 23), special, select_bits(u < (113u << 23), subnormal, normal));
  return uint16_t(result | (sign >> 16));
}

// bfloat16 -> binary32: the bits are float's upper half, exact.
RR_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(uint32_t(b) << 16);
}

// binary32 -> bfloat16, round to nearest even, NaN stays NaN (quiet).
RR_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u = float_bits(f);
  // Rounding 0x7fff + the lowest kept bit carries into the exponent where it
  // must (max finite -> inf); a NaN could carry into inf, so it is taken apart.
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

RR_HOST_DEVICE inline float to_float(Half h) { return half_bits_to_float(h.bits); }
RR_HOST_DEVICE inline float to_float(BFloat16 b) { return bfloat16_bits_to_float(b.bits); }
RR_HOST_DEVICE inline Half to_half(float f) { return Half{float_to_half_bits(f)}; }
RR_HOST_DEVICE inline BFloat16 to_bfloat16(float f) { return BFloat16{float_to_bfloat16_bits(f)}; }

}  // namespace rr
