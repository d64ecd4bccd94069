// Host reductions (lib/reduce/): every dtype x op against a reference that
// is computed independently (exact integer arithmetic, double, GCC's
// _Float16), over awkward counts, misaligned pointers, in place and out of
// place; and the float16 / bfloat16 conversions, exhaustively where possible.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "reduce/functors.hpp"
#include "reduce/half.hpp"
#include "reduce/reduce.hpp"
#include "reduce/with_dtype.hpp"

namespace rr::reduce {
namespace {

// ---------------------------------------------------------------------------
// Reference conversions, written independently of half.hpp.

#if defined(__FLT16_MAX__)
// GCC's _Float16 (libgcc soft-fp or F16C): IEEE conversions, quiet NaNs.
uint16_t ref_float_to_half(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}
float ref_half_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}
constexpr bool kHaveFloat16Reference = true;
#else
uint16_t ref_float_to_half(float f) { return float_to_half_bits(f); }
float ref_half_to_float(uint16_t bits) { return half_bits_to_float(bits); }
constexpr bool kHaveFloat16Reference = false;
#endif

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even on the upper 16 bits, spelled out; NaN -> quiet NaN.
uint16_t ref_float_to_bfloat16(float f) {
  uint32_t u = bits_of(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  uint32_t upper = u >> 16;
  uint32_t lower = u & 0xffffu;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u) != 0)) ++upper;
  return static_cast<uint16_t>(upper);
}
float ref_bfloat16_to_float(uint16_t bits) { return float_of(uint32_t(bits) << 16); }

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bfloat16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// ---------------------------------------------------------------------------
// float16 conversions.

TEST(Float16Conversion, ToFloatMatchesReferenceForEveryBitPattern) {
  if (!kHaveFloat16Reference) GTEST_SKIP() << "compiler has no _Float16";
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    ASSERT_EQ(bits_of(half_bits_to_float(bits)), bits_of(ref_half_to_float(bits)))
        << "half 0x" << std::hex << h;
  }
}

TEST(Float16Conversion, RoundTripsEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    uint16_t back = float_to_half_bits(half_bits_to_float(bits));
    if (half_is_nan(bits)) {
      // NaN stays NaN, quieted, sign and payload kept.
      ASSERT_TRUE(half_is_nan(back)) << std::hex << h;
      ASSERT_EQ(back, bits | 0x200u) << std::hex << h;
    } else {
      ASSERT_EQ(back, bits) << "half 0x" << std::hex << h;
    }
  }
}

TEST(Float16Conversion, SpotValues) {
  EXPECT_EQ(half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));   // smallest normal
  EXPECT_TRUE(std::isinf(half_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_EQ(bits_of(half_bits_to_float(0x8000)), 0x80000000u);  // -0

  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // halfway to 2^16 rounds to inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);   // halfway, to even (0)
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);   // halfway, to even (2)
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(float_to_half_bits(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // halfway, to even
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);      // halfway, to even
  EXPECT_EQ(float_to_half_bits(std::ldexp(2047.0f, -25)), 0x0400);  // max subnormal + half ulp
  EXPECT_TRUE(half_is_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half_bits(float_of(0x7f800001u))));  // payload only in low bits
  EXPECT_TRUE(half_is_nan(float_to_half_bits(float_of(0xff800001u))));
}

// Floats whose half conversion is on an edge: overflow, halfway points,
// subnormal boundaries, NaNs, and their float neighbours.
std::vector<float> float16_edge_cases() {
  std::vector<float> base = {
      0.0f, 65504.0f, 65520.0f, 65536.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
      std::ldexp(3.0f, -25), std::ldexp(1.0f, -14), std::ldexp(2047.0f, -25),
      std::ldexp(1023.0f, -24), 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11), 1.0f,
      std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
      std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity(),
      float_of(0x7fc00000u), float_of(0x7f800001u), float_of(0x7fbfffffu), float_of(0x7fffe000u),
      float_of(0x7fc01000u)};
  std::vector<float> cases;
  for (float f : base) {
    for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
      cases.push_back(g);
      cases.push_back(-g);
    }
  }
  return cases;
}

TEST(Float16Conversion, FromFloatMatchesReference) {
  if (!kHaveFloat16Reference) GTEST_SKIP() << "compiler has no _Float16";
  for (float f : float16_edge_cases()) {
    ASSERT_EQ(float_to_half_bits(f), ref_float_to_half(f)) << "float 0x" << std::hex << bits_of(f);
  }
  std::mt19937 rng(12345);
  // Any bit pattern: mostly outside half's range (inf, zero), NaNs included.
  for (int i = 0; i < 1000000; ++i) {
    float f = float_of(rng());
    ASSERT_EQ(float_to_half_bits(f), ref_float_to_half(f)) << "float 0x" << std::hex << bits_of(f);
  }
  // Exponents around half's range (2^-26 .. 2^16), where the rounding happens.
  std::uniform_int_distribution<uint32_t> exponent(127 - 26, 127 + 16);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = (rng() & 0x807fffffu) | (exponent(rng) << 23);
    float f = float_of(u);
    ASSERT_EQ(float_to_half_bits(f), ref_float_to_half(f)) << "float 0x" << std::hex << u;
  }
}

// ---------------------------------------------------------------------------
// bfloat16 conversions.

TEST(BFloat16Conversion, RoundTripsEveryBitPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float f = bfloat16_bits_to_float(bits);
    ASSERT_EQ(bits_of(f), uint32_t(bits) << 16);  // exact: the upper half of a float
    uint16_t back = float_to_bfloat16_bits(f);
    if (bfloat16_is_nan(bits)) {
      ASSERT_EQ(back, bits | 0x40u) << std::hex << b;  // quieted
    } else {
      ASSERT_EQ(back, bits) << "bfloat16 0x" << std::hex << b;
    }
  }
}

TEST(BFloat16Conversion, FromFloatMatchesReference) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(float_of(0x3f808000u)), 0x3f80);  // halfway, to even
  EXPECT_EQ(float_to_bfloat16_bits(float_of(0x3f818000u)), 0x3f82);  // halfway, to even
  EXPECT_EQ(float_to_bfloat16_bits(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(float_to_bfloat16_bits(float_of(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits(float_of(0x00018000u)), 0x0002);  // subnormal, to even
  EXPECT_TRUE(bfloat16_is_nan(float_to_bfloat16_bits(float_of(0x7f800001u))));  // not inf
  EXPECT_TRUE(bfloat16_is_nan(float_to_bfloat16_bits(float_of(0xffffffffu))));
  std::mt19937 rng(777);
  for (int i = 0; i < 1000000; ++i) {
    float f = float_of(rng());
    ASSERT_EQ(float_to_bfloat16_bits(f), ref_float_to_bfloat16(f)) << std::hex << bits_of(f);
  }
  for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
    for (uint32_t high = 0; high <= 0xffff; ++high) {
      float f = float_of(high << 16 | low);
      ASSERT_EQ(float_to_bfloat16_bits(f), ref_float_to_bfloat16(f)) << std::hex << bits_of(f);
    }
  }
}

// ---------------------------------------------------------------------------
// Functors: the element semantics the kernels share.

TEST(Functors, IntegerSumAndProdWrap) {
  EXPECT_EQ(SumOp<int8_t>{}(100, 100), -56);
  EXPECT_EQ(SumOp<uint8_t>{}(200, 100), 44);
  EXPECT_EQ(ProdOp<int8_t>{}(-128, -1), -128);
  EXPECT_EQ(ProdOp<uint8_t>{}(16, 16), 0);
  EXPECT_EQ(SumOp<int32_t>{}(std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ProdOp<int32_t>{}(65536, 65536), 0);
  EXPECT_EQ(ProdOp<uint32_t>{}(0xffffffffu, 0xffffffffu), 1u);
  EXPECT_EQ(SumOp<int64_t>{}(std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ProdOp<int64_t>{}(int64_t(1) << 32, int64_t(1) << 32), 0);
  EXPECT_EQ(ProdOp<uint64_t>{}(~uint64_t(0), ~uint64_t(0)), 1u);
}

TEST(Functors, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(MaxOp<float>{}(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(MaxOp<float>{}(1.0f, nan)));
  EXPECT_TRUE(std::isnan(MinOp<float>{}(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(MinOp<float>{}(1.0f, nan)));
  EXPECT_TRUE(std::isnan(MaxOp<double>{}(2.0, std::nan(""))));
  EXPECT_EQ(MaxOp<float>{}(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(MinOp<float>{}(1.0f, 2.0f), 1.0f);
  Half h_nan{0x7e00}, h_one{0x3c00};
  EXPECT_TRUE(half_is_nan(MaxOp<Half>{}(h_one, h_nan).bits));
  EXPECT_TRUE(half_is_nan(MinOp<Half>{}(h_nan, h_one).bits));
  BFloat16 b_nan{0x7fc0}, b_one{0x3f80};
  EXPECT_TRUE(bfloat16_is_nan(MaxOp<BFloat16>{}(b_one, b_nan).bits));
  EXPECT_TRUE(bfloat16_is_nan(MinOp<BFloat16>{}(b_nan, b_one).bits));
}

TEST(Functors, DivideTruncatesTowardZero) {
  EXPECT_EQ(DivideOp<int32_t>{2}(-7), -3);
  EXPECT_EQ(DivideOp<int32_t>{2}(7), 3);
  EXPECT_EQ(DivideOp<int32_t>{1}(std::numeric_limits<int32_t>::min()),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(DivideOp<int32_t>{3}(std::numeric_limits<int32_t>::max()), 715827882);
  EXPECT_EQ(DivideOp<uint32_t>{7}(0xffffffffu), 0xffffffffu / 7);
  EXPECT_EQ(DivideOp<int8_t>{3}(-128), -42);
  EXPECT_EQ(DivideOp<int64_t>{3}(-(int64_t(1) << 62) - 1), (-(int64_t(1) << 62) - 1) / 3);
  EXPECT_EQ(DivideOp<uint64_t>{3}(~uint64_t(0)), ~uint64_t(0) / 3);
  EXPECT_EQ(SumDivideOp<int8_t>{2}(100, 100), -28);  // the sum wraps first
  // float16: (a + b) / n in float, rounded once; 65504 + 65504 would be inf in half.
  EXPECT_EQ(SumDivideOp<Half>{2}(Half{0x7bff}, Half{0x7bff}).bits, 0x7bff);
}

// ---------------------------------------------------------------------------
// reduce(), reduce_last(), finish() over every dtype x op.

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T>;

// Random inputs. Integers: mostly full-range values (sums and products
// wrap), some small ones. Floats: random sign and mantissa with exponents in
// a band where products stay finite, and an occasional zero of either sign.
// float16: exponent field 0..21 (subnormals up to values below 2^7), so
// |a * b| < 2^14.
template <typename T>
T random_value(std::mt19937_64& rng) {
  if constexpr (kIsInt<T>) {
    if (rng() % 8 == 0) return static_cast<T>(static_cast<int>(rng() % 7) - 3);
    return static_cast<T>(rng());
  } else if constexpr (std::is_same_v<T, float>) {
    if (rng() % 32 == 0) return rng() % 2 ? 0.0f : -0.0f;
    uint32_t exponent = 127 - 30 + static_cast<uint32_t>(rng() % 61);
    return float_of((static_cast<uint32_t>(rng()) & 0x807fffffu) | exponent << 23);
  } else if constexpr (std::is_same_v<T, double>) {
    if (rng() % 32 == 0) return rng() % 2 ? 0.0 : -0.0;
    uint64_t exponent = 1023 - 200 + rng() % 401;
    uint64_t u = (rng() & 0x800fffffffffffffull) | exponent << 52;
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
  } else if constexpr (std::is_same_v<T, Half>) {
    uint32_t exponent = static_cast<uint32_t>(rng() % 22);
    return Half{static_cast<uint16_t>((rng() & 0x83ffu) | exponent << 10)};
  } else {
    uint32_t exponent = 127 - 40 + static_cast<uint32_t>(rng() % 81);
    return BFloat16{static_cast<uint16_t>((rng() & 0x807fu) | exponent << 7)};
  }
}

// Reference float max/min, NaN-propagating; a tie (including +0 vs -0)
// gives the second input, as functors.hpp documents.
template <typename F>
F ref_max(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}
template <typename F>
F ref_min(F a, F b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a < b ? a : b;
}

// a op b, with rrAvg as sum. Integers: exact arithmetic modulo 2^64,
// truncated; the bitwise ops on the two's complement bits, widened to 64.
template <typename T>
T ref_binary(rrRedOp_t op, T a, T b) {
  if constexpr (kIsInt<T>) {
    const uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
    switch (op) {
      case rrSum:
      case rrAvg: return static_cast<T>(x + y);
      case rrProd: return static_cast<T>(x * y);
      case rrMax: return a < b ? b : a;
      case rrMin: return a < b ? a : b;
      case rrBand: return static_cast<T>(x & y);
      case rrBor: return static_cast<T>(x | y);
      case rrBxor: return static_cast<T>(x ^ y);
      default: ADD_FAILURE() << "no reference for op " << op; return T{};
    }
  } else if constexpr (std::is_same_v<T, float>) {
    // The exact sum or product, rounded once to float by the cast (double has
    // enough precision that the double rounding is innocuous).
    switch (op) {
      case rrSum:
      case rrAvg: return static_cast<float>(double(a) + double(b));
      case rrProd: return static_cast<float>(double(a) * double(b));
      case rrMax: return ref_max(a, b);
      default: return ref_min(a, b);
    }
  } else if constexpr (std::is_same_v<T, double>) {
    switch (op) {
      case rrSum:
      case rrAvg: return a + b;
      case rrProd: return a * b;
      case rrMax: return ref_max(a, b);
      default: return ref_min(a, b);
    }
  } else {
    constexpr bool kHalf = std::is_same_v<T, Half>;
    float x = kHalf ? ref_half_to_float(a.bits) : ref_bfloat16_to_float(a.bits);
    float y = kHalf ? ref_half_to_float(b.bits) : ref_bfloat16_to_float(b.bits);
    float r = op == rrSum || op == rrAvg ? x + y
              : op == rrProd             ? x * y
              : op == rrMax              ? ref_max(x, y)
                                         : ref_min(x, y);
    return T{kHalf ? ref_float_to_half(r) : ref_float_to_bfloat16(r)};
  }
}

// x / divisor: integers truncate toward zero; floats round once.
template <typename T>
T ref_divide(T x, int divisor) {
  if constexpr (kIsInt<T> && std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(x) / divisor);
  } else if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(double(x) / divisor);
  } else if constexpr (std::is_same_v<T, double>) {
    return x / divisor;
  } else if constexpr (std::is_same_v<T, Half>) {
    return T{ref_float_to_half(ref_half_to_float(x.bits) / static_cast<float>(divisor))};
  } else {
    return T{ref_float_to_bfloat16(ref_bfloat16_to_float(x.bits) / static_cast<float>(divisor))};
  }
}

// The last step of avg: float16 and bfloat16 divide the float sum, unrounded.
template <typename T>
T ref_sum_divide(T a, T b, int divisor) {
  if constexpr (std::is_same_v<T, Half>) {
    float sum = ref_half_to_float(a.bits) + ref_half_to_float(b.bits);
    return T{ref_float_to_half(sum / static_cast<float>(divisor))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    float sum = ref_bfloat16_to_float(a.bits) + ref_bfloat16_to_float(b.bits);
    return T{ref_float_to_bfloat16(sum / static_cast<float>(divisor))};
  } else {
    return ref_divide(ref_binary(rrSum, a, b), divisor);
  }
}

// Bit-exact comparison (NaN payloads included) and printing.
template <typename T>
bool same_bits(const T& x, const T& y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}
template <typename T>
std::string show(const T& x) {
  if constexpr (std::is_same_v<T, Half>) {
    return "half(" + std::to_string(half_bits_to_float(x.bits)) + ")";
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return "bfloat16(" + std::to_string(bfloat16_bits_to_float(x.bits)) + ")";
  } else if constexpr (std::is_floating_point_v<T>) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", static_cast<double>(x));
    return text;
  } else {
    return std::to_string(+x);
  }
}

// Expects got[i] == want[i] for i < count, and got[count] untouched (a
// sentinel: the call must not write past the end).
template <typename T>
void expect_elements(const char* what, const T* got, const std::vector<T>& want, size_t count,
                     const T& sentinel, const T* a, const T* b) {
  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!same_bits(got[i], want[i])) {
      if (mismatches == 0) {
        ADD_FAILURE() << what << ", count " << count << ": element " << i << " is " << show(got[i])
                      << ", expected " << show(want[i]) << " (a = " << show(a[i])
                      << ", b = " << (b != nullptr ? show(b[i]) : std::string("-")) << ")";
      }
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0u) << what << ", count " << count;
  EXPECT_TRUE(same_bits(got[count], sentinel)) << what << ": wrote past the end, count " << count;
}

const size_t kCounts[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64 + 5, 1000, 4099};
const int kDivisors[] = {1, 3, 7};

template <typename T>
void check_dtype_op(rrDataType_t dtype, rrRedOp_t op) {
  std::mt19937_64 sentinel_rng(99);
  const T sentinel = random_value<T>(sentinel_rng);
  for (size_t count : kCounts) {
    // offset 1 misaligns every buffer by one element.
    for (size_t offset : {size_t{0}, size_t{1}}) {
      std::mt19937_64 rng(count * 2 + offset + 1000 * (dtype + 1) + 100000 * (op + 1));
      const size_t n = count + offset + 1;
      std::vector<T> a(n), b(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = random_value<T>(rng);
        // Some ties: max and min must pick the same element as the reference.
        b[i] = rng() % 16 == 0 ? a[i] : random_value<T>(rng);
      }
      const T* pa = a.data() + offset;
      const T* pb = b.data() + offset;
      std::vector<T> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = ref_binary(op, pa[i], pb[i]);

      std::vector<T> out(n, sentinel);
      reduce(out.data() + offset, pa, pb, count, dtype, op);
      expect_elements("out of place", out.data() + offset, want, count, sentinel, pa, pb);

      std::vector<T> in_a = a;
      in_a[offset + count] = sentinel;
      reduce(in_a.data() + offset, in_a.data() + offset, pb, count, dtype, op);
      expect_elements("in place (dst == a)", in_a.data() + offset, want, count, sentinel, pa, pb);

      std::vector<T> in_b = b;
      in_b[offset + count] = sentinel;
      reduce(in_b.data() + offset, pa, in_b.data() + offset, count, dtype, op);
      expect_elements("in place (dst == b)", in_b.data() + offset, want, count, sentinel, pa, pb);

      for (int divisor : kDivisors) {
        const std::string with = " divisor " + std::to_string(divisor);
        std::vector<T> want_last(count);
        for (size_t i = 0; i < count; ++i) {
          want_last[i] = op == rrAvg ? ref_sum_divide(pa[i], pb[i], divisor) : want[i];
        }
        std::vector<T> last(n, sentinel);
        reduce_last(last.data() + offset, pa, pb, count, dtype, op, divisor);
        expect_elements(("reduce_last" + with).c_str(), last.data() + offset, want_last, count,
                        sentinel, pa, pb);
        std::vector<T> last_in = b;
        last_in[offset + count] = sentinel;
        reduce_last(last_in.data() + offset, pa, last_in.data() + offset, count, dtype, op,
                    divisor);
        expect_elements(("reduce_last in place" + with).c_str(), last_in.data() + offset,
                        want_last, count, sentinel, pa, pb);

        std::vector<T> want_finish(count);
        for (size_t i = 0; i < count; ++i) {
          want_finish[i] = op == rrAvg ? ref_divide(pa[i], divisor) : pa[i];
        }
        std::vector<T> fin(n, sentinel);
        finish(fin.data() + offset, pa, count, dtype, op, divisor);
        expect_elements(("finish" + with).c_str(), fin.data() + offset, want_finish, count,
                        sentinel, pa, static_cast<const T*>(nullptr));
        std::vector<T> fin_in = a;
        fin_in[offset + count] = sentinel;
        finish(fin_in.data() + offset, fin_in.data() + offset, count, dtype, op, divisor);
        expect_elements(("finish in place" + with).c_str(), fin_in.data() + offset, want_finish,
                        count, sentinel, pa, static_cast<const T*>(nullptr));
      }
    }
  }
}

// Calls f(T{}) with T the C++ type of dtype.
template <typename F>
void with_type(rrDataType_t dtype, F&& f) {
  if (!rr::reduce::with_dtype(dtype, f)) FAIL() << "unknown dtype " << dtype;
}

const rrDataType_t kDtypes[] = {rrInt8,    rrUint8,   rrInt32,   rrUint32,  rrInt64,
                                rrUint64,  rrFloat16, rrFloat32, rrFloat64, rrBfloat16};
const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg};

class ReduceEveryDtypeOp : public ::testing::TestWithParam<std::tuple<rrDataType_t, rrRedOp_t>> {
 protected:
  void TearDown() override { allow_f16c(true); }
};

TEST_P(ReduceEveryDtypeOp, MatchesReferenceInAndOutOfPlace) {
  // Plain names, not a structured binding: clang (the sanitizer builds'
  // compiler) lets a lambda capture only variables before C++20.
  const rrDataType_t dtype = std::get<0>(GetParam());
  const rrRedOp_t op = std::get<1>(GetParam());
  // float16 has two implementations (F16C and portable); check both.
  std::vector<bool> f16c_choices = {true};
  if (dtype == rrFloat16 && float16_uses_f16c()) f16c_choices.push_back(false);
  for (bool f16c : f16c_choices) {
    SCOPED_TRACE(f16c ? "automatic loops" : "portable float16 loops");
    allow_f16c(f16c);
    with_type(dtype, [&](auto tag) { check_dtype_op<decltype(tag)>(dtype, op); });
  }
}

std::string case_name(const ::testing::TestParamInfo<ReduceEveryDtypeOp::ParamType>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_" + op_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndOps, ReduceEveryDtypeOp,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps)),
                         case_name);

// The bitwise ops exist for the integer dtypes only.
const rrDataType_t kIntegerDtypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64};
const rrDataType_t kFloatingDtypes[] = {rrFloat16, rrFloat32, rrFloat64, rrBfloat16};
const rrRedOp_t kBitwiseOps[] = {rrBand, rrBor, rrBxor};

INSTANTIATE_TEST_SUITE_P(IntegerDtypesBitwiseOps, ReduceEveryDtypeOp,
                         ::testing::Combine(::testing::ValuesIn(kIntegerDtypes),
                                            ::testing::ValuesIn(kBitwiseOps)),
                         case_name);

TEST(Reduce, BitwiseOpsAreDefinedForIntegersOnly) {
  for (rrDataType_t dtype : kIntegerDtypes) {
    for (int op = 0; op < rrNumOps; ++op) {
      EXPECT_TRUE(op_defined(dtype, static_cast<rrRedOp_t>(op))) << dtype_name(dtype) << " op " << op;
    }
  }
  for (rrDataType_t dtype : kFloatingDtypes) {
    for (rrRedOp_t op : kOps) EXPECT_TRUE(op_defined(dtype, op)) << dtype_name(dtype) << " " << op_name(op);
    for (rrRedOp_t op : kBitwiseOps) {
      EXPECT_FALSE(op_defined(dtype, op)) << dtype_name(dtype) << " " << op_name(op);
    }
    EXPECT_TRUE(is_floating(dtype));
  }
  for (rrRedOp_t op : kBitwiseOps) EXPECT_TRUE(is_bitwise(op)) << op_name(op);
  for (rrRedOp_t op : kOps) EXPECT_FALSE(is_bitwise(op)) << op_name(op);
  EXPECT_FALSE(op_defined(rrInt32, static_cast<rrRedOp_t>(rrNumOps)));
  EXPECT_FALSE(op_defined(static_cast<rrDataType_t>(rrNumTypes), rrBand));
}

// Known values: signed types keep their sign bit through every op.
TEST(Reduce, BitwiseOpsOnKnownValues) {
  const std::vector<int8_t> a = {-1, -128, 0x55, 12}, b = {0x0f, 0x7f, -0x56, 10};
  std::vector<int8_t> out(4);
  reduce(out.data(), a.data(), b.data(), 4, rrInt8, rrBand);
  EXPECT_EQ(out, (std::vector<int8_t>{0x0f, 0, 0, 8}));
  reduce(out.data(), a.data(), b.data(), 4, rrInt8, rrBor);
  EXPECT_EQ(out, (std::vector<int8_t>{-1, -1, -1, 14}));
  reduce(out.data(), a.data(), b.data(), 4, rrInt8, rrBxor);
  EXPECT_EQ(out, (std::vector<int8_t>{-16, -1, -1, 6}));
  const std::vector<uint64_t> ua = {~uint64_t{0}, uint64_t{1} << 63}, ub = {uint64_t{1} << 40, 3};
  std::vector<uint64_t> uout(2);
  reduce_last(uout.data(), ua.data(), ub.data(), 2, rrUint64, rrBxor, 3);  // the divisor is avg's only
  EXPECT_EQ(uout, (std::vector<uint64_t>{~(uint64_t{1} << 40), (uint64_t{1} << 63) | 3}));
  finish(uout.data(), ua.data(), 2, rrUint64, rrBand, 3);  // a copy
  EXPECT_EQ(uout, ua);
}

// The checks above can fail: on the same inputs every two ops give different
// results somewhere, so a loop wired to the wrong op would be caught.
TEST(Reduce, OpsAreDistinguishable) {
  for (rrDataType_t dtype : kDtypes) {
    with_type(dtype, [&](auto tag) {
      using T = decltype(tag);
      std::mt19937_64 rng(5);
      const size_t count = 1000;
      std::vector<T> a(count), b(count);
      for (size_t i = 0; i < count; ++i) {
        a[i] = random_value<T>(rng);
        b[i] = random_value<T>(rng);
      }
      std::vector<rrRedOp_t> ops = {rrSum, rrProd, rrMax, rrMin};
      if (!is_floating(dtype)) ops.insert(ops.end(), {rrBand, rrBor, rrBxor});
      std::vector<std::vector<T>> results;
      for (rrRedOp_t op : ops) {
        std::vector<T> out(count);
        reduce(out.data(), a.data(), b.data(), count, dtype, op);
        results.push_back(out);
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        for (size_t j = i + 1; j < ops.size(); ++j) {
          EXPECT_NE(std::memcmp(results[i].data(), results[j].data(), count * sizeof(T)), 0)
              << dtype_name(dtype) << ": " << op_name(ops[i]) << " == " << op_name(ops[j]);
        }
      }
      // avg's last step divides: it differs from sum for divisor > 1.
      std::vector<T> avg(count);
      reduce_last(avg.data(), a.data(), b.data(), count, dtype, rrAvg, 3);
      EXPECT_NE(std::memcmp(avg.data(), results[0].data(), count * sizeof(T)), 0)
          << dtype_name(dtype) << ": avg == sum";
    });
  }
}

// And the comparison itself catches a single wrong element.
TEST(Reduce, ComparisonCatchesOneWrongElement) {
  std::vector<float> want = {1.0f, 2.0f, 3.0f};
  std::vector<float> got = {1.0f, 2.0f, std::nextafter(3.0f, 4.0f), 0.0f};
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_elements("probe", got.data(), want, 3, 0.0f, want.data(), want.data());
  }
  EXPECT_GT(failures.size(), 0);
}

TEST(Reduce, MaxMinPropagateNaNInEveryFloatType) {
  for (rrDataType_t dtype : {rrFloat16, rrFloat32, rrFloat64, rrBfloat16}) {
    for (bool f16c : {true, false}) {
      allow_f16c(f16c);
      with_type(dtype, [&](auto tag) {
        using T = decltype(tag);
        T nan, one;
        if constexpr (std::is_same_v<T, Half>) {
          nan = Half{0x7e00};
          one = Half{0x3c00};
        } else if constexpr (std::is_same_v<T, BFloat16>) {
          nan = BFloat16{0x7fc0};
          one = BFloat16{0x3f80};
        } else {
          nan = std::numeric_limits<T>::quiet_NaN();
          one = T(1);
        }
        // 37 elements: NaN in a at even indices, in b at odd ones, in vector
        // bodies and in the scalar tail.
        const size_t count = 37;
        std::vector<T> a(count, one), b(count, one), out(count);
        for (size_t i = 0; i < count; ++i) (i % 2 ? b : a)[i] = nan;
        for (rrRedOp_t op : {rrMax, rrMin}) {
          reduce(out.data(), a.data(), b.data(), count, dtype, op);
          for (size_t i = 0; i < count; ++i) {
            EXPECT_TRUE(same_bits(out[i], nan))
                << dtype_name(dtype) << " " << op_name(op) << " element " << i;
          }
        }
      });
    }
  }
  allow_f16c(true);
}

TEST(Reduce, AvgOfIntegersTruncatesWrappedSum) {
  std::vector<int8_t> a = {100, -7, 7, -128, 1}, b = {100, 0, 0, -1, 0}, out(5);
  reduce_last(out.data(), a.data(), b.data(), a.size(), rrInt8, rrAvg, 2);
  EXPECT_EQ(out, (std::vector<int8_t>{-28, -3, 3, 63, 0}));
  std::vector<uint64_t> ua = {~uint64_t(0), 5}, ub = {0, 0}, uout(2);
  reduce_last(uout.data(), ua.data(), ub.data(), 2, rrUint64, rrAvg, 3);
  EXPECT_EQ(uout, (std::vector<uint64_t>{~uint64_t(0) / 3, 1}));
}

TEST(Reduce, AvgReducesAsSumBeforeTheLastStep) {
  std::vector<float> a = {1.0f, 2.0f}, b = {3.0f, 4.0f}, out(2);
  reduce(out.data(), a.data(), b.data(), 2, rrFloat32, rrAvg);
  EXPECT_EQ(out, (std::vector<float>{4.0f, 6.0f}));
  reduce_last(out.data(), a.data(), b.data(), 2, rrFloat32, rrAvg, 2);
  EXPECT_EQ(out, (std::vector<float>{2.0f, 3.0f}));
  // Other ops ignore the divisor.
  reduce_last(out.data(), a.data(), b.data(), 2, rrFloat32, rrSum, 2);
  EXPECT_EQ(out, (std::vector<float>{4.0f, 6.0f}));
}

TEST(Reduce, Float16SumOverflowsToInfinity) {
  for (bool f16c : {true, false}) {
    allow_f16c(f16c);
    // 65504 + 16 = 65520 is halfway to 2^16: inf. 65504 + 8 rounds back down.
    std::vector<Half> a(20, Half{0x7bff}), b(20, Half{0x4c00}), out(20);  // 0x4c00 = 16
    b[19] = Half{0x4800};                                                 // 8
    reduce(out.data(), a.data(), b.data(), 20, rrFloat16, rrSum);
    for (size_t i = 0; i < 19; ++i) EXPECT_EQ(out[i].bits, 0x7c00) << i;
    EXPECT_EQ(out[19].bits, 0x7bff);
  }
  allow_f16c(true);
}

// F16C and portable float16 loops give the same bits on any input: NaNs,
// infinities, subnormals and overflow included. One exception: when both
// inputs of a sum or product are NaN, which payload survives depends on the
// operand order the compiler chose (IEEE leaves it open); both give a NaN.
size_t count_float16_differences(const std::vector<Half>& x, const std::vector<Half>& y) {
  size_t differences = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    bool both_nan = half_is_nan(x[i].bits) && half_is_nan(y[i].bits);
    if (x[i].bits != y[i].bits && !both_nan) ++differences;
  }
  return differences;
}

TEST(Reduce, Float16LoopsAgreeOnAnyBits) {
  if (!float16_uses_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937_64 rng(31);
  const size_t count = 4099;
  std::vector<Half> a(count), b(count), fast(count), portable(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = Half{static_cast<uint16_t>(rng())};
    b[i] = Half{static_cast<uint16_t>(rng())};
  }
  for (rrRedOp_t op : kOps) {
    for (int divisor : {1, 3}) {
      allow_f16c(true);
      reduce_last(fast.data(), a.data(), b.data(), count, rrFloat16, op, divisor);
      allow_f16c(false);
      reduce_last(portable.data(), a.data(), b.data(), count, rrFloat16, op, divisor);
      EXPECT_EQ(count_float16_differences(fast, portable), 0u)
          << op_name(op) << " divisor " << divisor;
      allow_f16c(true);
      finish(fast.data(), a.data(), count, rrFloat16, op, divisor);
      allow_f16c(false);
      finish(portable.data(), a.data(), count, rrFloat16, op, divisor);
      // One input: no choice of payload, so bit for bit.
      EXPECT_EQ(std::memcmp(fast.data(), portable.data(), count * sizeof(Half)), 0)
          << "finish " << op_name(op) << " divisor " << divisor;
    }
  }
  allow_f16c(true);
}

TEST(Reduce, ZeroCountTouchesNothing) {
  for (rrDataType_t dtype : kDtypes) {
    for (int raw_op = 0; raw_op < rrNumOps; ++raw_op) {
      const auto op = static_cast<rrRedOp_t>(raw_op);
      if (!op_defined(dtype, op)) continue;
      // Null pointers are fine with count 0.
      reduce(nullptr, nullptr, nullptr, 0, dtype, op);
      reduce_last(nullptr, nullptr, nullptr, 0, dtype, op, 2);
      finish(nullptr, nullptr, 0, dtype, op, 2);
    }
  }
}

// ---------------------------------------------------------------------------
// Names and sizes.

TEST(DtypeInfo, SizesAndNames) {
  const struct {
    rrDataType_t dtype;
    size_t size;
    const char* name;
  } expected[] = {
      {rrInt8, 1, "int8"},       {rrUint8, 1, "uint8"},     {rrInt32, 4, "int32"},
      {rrUint32, 4, "uint32"},   {rrInt64, 8, "int64"},     {rrUint64, 8, "uint64"},
      {rrFloat16, 2, "float16"}, {rrFloat32, 4, "float32"}, {rrFloat64, 8, "float64"},
      {rrBfloat16, 2, "bfloat16"},
  };
  for (const auto& e : expected) {
    EXPECT_EQ(dtype_size(e.dtype), e.size) << e.name;
    EXPECT_STREQ(dtype_name(e.dtype), e.name);
    EXPECT_TRUE(valid_dtype(e.dtype));
  }
  EXPECT_EQ(dtype_size(static_cast<rrDataType_t>(rrNumTypes)), 0u);
  EXPECT_EQ(dtype_size(static_cast<rrDataType_t>(-1)), 0u);
  EXPECT_STREQ(dtype_name(static_cast<rrDataType_t>(42)), "unknown");
  EXPECT_FALSE(valid_dtype(-1));
  EXPECT_FALSE(valid_dtype(rrNumTypes));
}

TEST(DtypeInfo, OpNames) {
  EXPECT_STREQ(op_name(rrSum), "sum");
  EXPECT_STREQ(op_name(rrProd), "prod");
  EXPECT_STREQ(op_name(rrMax), "max");
  EXPECT_STREQ(op_name(rrMin), "min");
  EXPECT_STREQ(op_name(rrAvg), "avg");
  EXPECT_STREQ(op_name(rrBand), "band");
  EXPECT_STREQ(op_name(rrBor), "bor");
  EXPECT_STREQ(op_name(rrBxor), "bxor");
  EXPECT_EQ(rrNumOps, 8);
  EXPECT_STREQ(op_name(static_cast<rrRedOp_t>(rrNumOps)), "unknown");
  for (int op = 0; op < rrNumOps; ++op) EXPECT_TRUE(valid_op(op));
  EXPECT_FALSE(valid_op(-1));
  EXPECT_FALSE(valid_op(rrNumOps));
}

}  // namespace
}  // namespace rr::reduce
