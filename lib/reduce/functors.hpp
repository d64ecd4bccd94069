#pragma once
// Element-wise reduction functors, shared by the host loops (reduce.cpp) and
// the CUDA kernels (kernels/). One definition of each op's semantics:
//
// - Integers: sum and prod wrap modulo 2^bits, as NCCL's do. The arithmetic
//   runs in an unsigned type at least as wide as unsigned int, so neither the
//   signed type nor integer promotion can overflow (undefined behaviour).
// - Floats: one IEEE operation, rounded once. Half and BFloat16 widen to
//   float exactly, compute in float and round once back.
// - Max/min propagate NaN: if either input is NaN the result is that NaN
//   (a's when both are). NCCL uses fmaxf/fminf, which drop NaNs; we do not,
//   because a NaN on one rank is a fault the caller should see on every rank.
//   Otherwise max(a, b) = a > b ? a : b, so max(+0, -0) is -0 (the second
//   input); every rank sees the same value because one chain reduces each
//   element.
// - Avg: the ring sums and the last step divides (SumDivideOp, DivideOp).
//   Floats divide once by the rank count; integers divide the wrapped sum,
//   truncating toward zero.
// - Band, bor, bxor: bitwise, integers only (as MPI_BAND/BOR/BXOR). A
//   floating type has no bitwise op: the C API refuses the pair, and the
//   functors do not compile for it, so no loop or kernel can exist for it.

#include <cstdint>

#include "reduce/half.hpp"

namespace rr::reduce {

// Unsigned type in which + and * of T wrap modulo 2^32 or 2^64 without
// promotion to a signed int. Truncating back to T keeps the low bits (two's
// complement, as GCC, Clang and nvcc define the conversion).
template <typename T>
struct WrapType;
template <> struct WrapType<int8_t> { using type = uint32_t; };
template <> struct WrapType<uint8_t> { using type = uint32_t; };
template <> struct WrapType<int32_t> { using type = uint32_t; };
template <> struct WrapType<uint32_t> { using type = uint32_t; };
template <> struct WrapType<int64_t> { using type = uint64_t; };
template <> struct WrapType<uint64_t> { using type = uint64_t; };

// inline: an explicit specialization of a variable template is not implicitly
// inline, and every file that includes this one would define it (clang's
// sanitizer builds emit it and the link fails).
template <typename T>
inline constexpr bool kIsInteger = false;
template <> inline constexpr bool kIsInteger<int8_t> = true;
template <> inline constexpr bool kIsInteger<uint8_t> = true;
template <> inline constexpr bool kIsInteger<int32_t> = true;
template <> inline constexpr bool kIsInteger<uint32_t> = true;
template <> inline constexpr bool kIsInteger<int64_t> = true;
template <> inline constexpr bool kIsInteger<uint64_t> = true;

// x != x only for NaN; integers are never NaN. (Overloads rather than one
// template so integer self-comparisons do not trip -Wtautological-compare.)
RR_HOST_DEVICE inline bool is_nan(float x) { return x != x; }
RR_HOST_DEVICE inline bool is_nan(double x) { return x != x; }
template <typename T>
RR_HOST_DEVICE inline bool is_nan(T) { return false; }

template <typename T>
struct SumOp {
  RR_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>) {
      using W = typename WrapType<T>::type;
      return T(W(a) + W(b));
    } else {
      return a + b;
    }
  }
};

template <typename T>
struct ProdOp {
  RR_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (kIsInteger<T>) {
      using W = typename WrapType<T>::type;
      return T(W(a) * W(b));
    } else {
      return a * b;
    }
  }
};

template <typename T>
struct MaxOp {
  // Written as a select so loops vectorize (compare, or, blend).
  RR_HOST_DEVICE T operator()(T a, T b) const { return (a > b || is_nan(a)) ? a : b; }
};

template <typename T>
struct MinOp {
  RR_HOST_DEVICE T operator()(T a, T b) const { return (a < b || is_nan(a)) ? a : b; }
};

// Bitwise ops. The result of & | ^ on two values of T is a value of T, so
// the conversion back after integer promotion never changes it.
template <typename T>
struct BandOp {
  static_assert(kIsInteger<T>, "band is defined for integer types only");
  RR_HOST_DEVICE T operator()(T a, T b) const { return T(a & b); }
};

template <typename T>
struct BorOp {
  static_assert(kIsInteger<T>, "bor is defined for integer types only");
  RR_HOST_DEVICE T operator()(T a, T b) const { return T(a | b); }
};

template <typename T>
struct BxorOp {
  static_assert(kIsInteger<T>, "bxor is defined for integer types only");
  RR_HOST_DEVICE T operator()(T a, T b) const { return T(a ^ b); }
};

// x / divisor. Floats: one IEEE division. 8- and 32-bit integers divide in
// double and truncate: for |x| < 2^53 the double quotient is never rounded
// across an integer, so this is exact truncation toward zero, and unlike
// integer division it vectorizes. 64-bit integers divide natively.
template <typename T>
struct DivideOp {
  int divisor;
  RR_HOST_DEVICE T operator()(T x) const {
    if constexpr (sizeof(T) == 8 && kIsInteger<T>) {
      return T(x / T(divisor));
    } else if constexpr (kIsInteger<T>) {
      return T(double(x) / double(divisor));
    } else {
      return x / T(divisor);
    }
  }
};

// The last step of an average: (a + b) / divisor. The sum is rounded to T
// first, except for Half and BFloat16, whose sum stays in float (below).
template <typename T>
struct SumDivideOp {
  int divisor;
  RR_HOST_DEVICE T operator()(T a, T b) const { return DivideOp<T>{divisor}(SumOp<T>{}(a, b)); }
};

// Half and BFloat16: widen, apply the float op, round once.
#define RR_NARROW_FLOAT_OP(Op, Narrow, round)                                               \
  template <>                                                                                 \
  struct Op<Narrow> {                                                                         \
    RR_HOST_DEVICE Narrow operator()(Narrow a, Narrow b) const {                              \
      return round(Op<float>{}(to_float(a), to_float(b)));                                    \
    }                                                                                         \
  };
RR_NARROW_FLOAT_OP(SumOp, Half, to_half)
RR_NARROW_FLOAT_OP(ProdOp, Half, to_half)
RR_NARROW_FLOAT_OP(MaxOp, Half, to_half)
RR_NARROW_FLOAT_OP(MinOp, Half, to_half)
RR_NARROW_FLOAT_OP(SumOp, BFloat16, to_bfloat16)
RR_NARROW_FLOAT_OP(ProdOp, BFloat16, to_bfloat16)
RR_NARROW_FLOAT_OP(MaxOp, BFloat16, to_bfloat16)
RR_NARROW_FLOAT_OP(MinOp, BFloat16, to_bfloat16)
#undef RR_NARROW_FLOAT_OP

#define RR_NARROW_DIVIDE_OPS(Narrow, round)                                                  \
  template <>                                                                                 \
  struct DivideOp<Narrow> {                                                                   \
    int divisor;                                                                              \
    RR_HOST_DEVICE Narrow operator()(Narrow x) const {                                        \
      return round(DivideOp<float>{divisor}(to_float(x)));                                    \
    }                                                                                         \
  };                                                                                          \
  template <>                                                                                 \
  struct SumDivideOp<Narrow> {                                                                \
    int divisor;                                                                              \
    RR_HOST_DEVICE Narrow operator()(Narrow a, Narrow b) const {                              \
      return round(SumDivideOp<float>{divisor}(to_float(a), to_float(b)));                    \
    }                                                                                         \
  };
RR_NARROW_DIVIDE_OPS(Half, to_half)
RR_NARROW_DIVIDE_OPS(BFloat16, to_bfloat16)
#undef RR_NARROW_DIVIDE_OPS

}  // namespace rr::reduce
