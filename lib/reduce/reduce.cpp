#include "reduce/reduce.hpp"

#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "reduce/functors.hpp"
#include "reduce/half.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Each dtype x op loop below is one small non-template function, built by GCC
// function multiversioning for x86-64-v4 (AVX-512), v3 (AVX2) and the
// baseline; the dynamic loader picks the best clone once (an ifunc). The loop
// bodies are always_inline templates, because GCC 12 cannot clone templates.
// The loops are written dst[i] = op(a[i], b[i]) with no __restrict: GCC
// vectorizes them behind a runtime alias check that dst == a and dst == b
// pass, so in-place calls take the vector path too. float16 has a separate
// F16C set of loops, chosen per call (below).
//
// Under ThreadSanitizer the clones are left out: the loader runs an ifunc's
// resolver while relocating the library, before the sanitizer's runtime is
// up, and the instrumented resolver crashes there.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define RR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define RR_HAVE_F16C_LOOPS 1
#else
#define RR_CLONES
#define RR_HAVE_F16C_LOOPS 0
#endif

#define RR_ALWAYS_INLINE inline __attribute__((always_inline))

namespace rr::reduce {
namespace {

using BinaryKernel = void (*)(void* dst, const void* a, const void* b, size_t count);
using SumDivideKernel = void (*)(void* dst, const void* a, const void* b, size_t count,
                                 int divisor);
using DivideKernel = void (*)(void* dst, const void* src, size_t count, int divisor);

// The loops of one dtype. binary[] is indexed by rrRedOp_t: avg's slot holds
// the sum (avg sums; the division comes last), and the bitwise ops' slots are
// null for the floating types, which have none (op_defined()).
struct DtypeKernels {
  BinaryKernel binary[rrNumOps];
  SumDivideKernel sum_divide;
  DivideKernel divide;
};

template <typename T, typename Op>
RR_ALWAYS_INLINE void binary_loop(void* dst, const void* a, const void* b, size_t count, Op op) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) d[i] = op(x[i], y[i]);
}

template <typename T, typename Op>
RR_ALWAYS_INLINE void unary_loop(void* dst, const void* src, size_t count, Op op) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = op(s[i]);
}

// The portable loops of every dtype, float16 and bfloat16 included: their
// conversions are branch-free, so these vectorize as well.
#define RR_DTYPE_KERNELS(name, T)                                                            \
  RR_CLONES void name##_sum(void* d, const void* a, const void* b, size_t n) {               \
    binary_loop<T>(d, a, b, n, SumOp<T>{});                                                  \
  }                                                                                          \
  RR_CLONES void name##_prod(void* d, const void* a, const void* b, size_t n) {              \
    binary_loop<T>(d, a, b, n, ProdOp<T>{});                                                 \
  }                                                                                          \
  RR_CLONES void name##_max(void* d, const void* a, const void* b, size_t n) {               \
    binary_loop<T>(d, a, b, n, MaxOp<T>{});                                                  \
  }                                                                                          \
  RR_CLONES void name##_min(void* d, const void* a, const void* b, size_t n) {               \
    binary_loop<T>(d, a, b, n, MinOp<T>{});                                                  \
  }                                                                                          \
  RR_CLONES void name##_sum_divide(void* d, const void* a, const void* b, size_t n, int k) { \
    binary_loop<T>(d, a, b, n, SumDivideOp<T>{k});                                           \
  }                                                                                          \
  RR_CLONES void name##_divide(void* d, const void* s, size_t n, int k) {                    \
    unary_loop<T>(d, s, n, DivideOp<T>{k});                                                  \
  }

// The bitwise loops, for the integer dtypes.
#define RR_BITWISE_KERNELS(name, T)                                                          \
  RR_CLONES void name##_band(void* d, const void* a, const void* b, size_t n) {              \
    binary_loop<T>(d, a, b, n, BandOp<T>{});                                                 \
  }                                                                                          \
  RR_CLONES void name##_bor(void* d, const void* a, const void* b, size_t n) {               \
    binary_loop<T>(d, a, b, n, BorOp<T>{});                                                  \
  }                                                                                          \
  RR_CLONES void name##_bxor(void* d, const void* a, const void* b, size_t n) {              \
    binary_loop<T>(d, a, b, n, BxorOp<T>{});                                                 \
  }

#define RR_INTEGER_KERNELS(name, T)                                                          \
  RR_DTYPE_KERNELS(name, T)                                                                  \
  RR_BITWISE_KERNELS(name, T)                                                                \
  constexpr DtypeKernels name##_kernels = {                                                  \
      {name##_sum, name##_prod, name##_max, name##_min, name##_sum, name##_band, name##_bor,  \
       name##_bxor},                                                                         \
      name##_sum_divide,                                                                     \
      name##_divide};

#define RR_FLOAT_KERNELS(name, T)                                                            \
  RR_DTYPE_KERNELS(name, T)                                                                  \
  constexpr DtypeKernels name##_kernels = {                                                  \
      {name##_sum, name##_prod, name##_max, name##_min, name##_sum, nullptr, nullptr,         \
       nullptr},                                                                             \
      name##_sum_divide,                                                                     \
      name##_divide};

RR_INTEGER_KERNELS(int8, int8_t)
RR_INTEGER_KERNELS(uint8, uint8_t)
RR_INTEGER_KERNELS(int32, int32_t)
RR_INTEGER_KERNELS(uint32, uint32_t)
RR_INTEGER_KERNELS(int64, int64_t)
RR_INTEGER_KERNELS(uint64, uint64_t)
RR_FLOAT_KERNELS(float16, Half)
RR_FLOAT_KERNELS(float32, float)
RR_FLOAT_KERNELS(float64, double)
RR_FLOAT_KERNELS(bfloat16, BFloat16)
#undef RR_FLOAT_KERNELS
#undef RR_INTEGER_KERNELS
#undef RR_BITWISE_KERNELS
#undef RR_DTYPE_KERNELS

// [dtype], in rrDataType_t order.
constexpr DtypeKernels kKernels[rrNumTypes] = {
    int8_kernels,    uint8_kernels,   int32_kernels,   uint32_kernels,  int64_kernels,
    uint64_kernels,  float16_kernels, float32_kernels, float64_kernels, bfloat16_kernels,
};
static_assert(rrInt8 == 0 && rrUint8 == 1 && rrInt32 == 2 && rrUint32 == 3 && rrInt64 == 4 &&
                  rrUint64 == 5 && rrFloat16 == 6 && rrFloat32 == 7 && rrFloat64 == 8 &&
                  rrBfloat16 == 9,
              "kKernels is indexed by rrDataType_t");
static_assert(rrSum == 0 && rrProd == 1 && rrMax == 2 && rrMin == 3 && rrAvg == 4 && rrBand == 5 &&
                  rrBor == 6 && rrBxor == 7 && rrNumOps == 8,
              "DtypeKernels::binary is indexed by rrRedOp_t");

#if RR_HAVE_F16C_LOOPS
// float16 with F16C: one instruction converts 8 values where the portable
// code needs a dozen. Each step loads 8 halves of a and of b, widens them,
// applies the vector form of the op and narrows the result into dst; the
// tail (< 8 elements) runs the scalar functors, which give the same bits.
// Only the order of a NaN + NaN's operands may differ, which IEEE leaves open.
#define RR_F16C_TARGET __attribute__((target("avx2,f16c")))

// Vector forms of the float ops in functors.hpp, 8 lanes at a time.
struct F16cSum {
  RR_F16C_TARGET __m256 operator()(__m256 a, __m256 b) const { return _mm256_add_ps(a, b); }
};
struct F16cProd {
  RR_F16C_TARGET __m256 operator()(__m256 a, __m256 b) const { return _mm256_mul_ps(a, b); }
};
// vmaxps(a, b) is a > b ? a : b, so b when either is NaN; a NaN a is put back
// to match MaxOp's (a > b || is_nan(a)) ? a : b. Likewise for min.
struct F16cMax {
  RR_F16C_TARGET __m256 operator()(__m256 a, __m256 b) const {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
struct F16cMin {
  RR_F16C_TARGET __m256 operator()(__m256 a, __m256 b) const {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};
struct F16cSumDivide {
  __m256 divisor;
  RR_F16C_TARGET __m256 operator()(__m256 a, __m256 b) const {
    return _mm256_div_ps(_mm256_add_ps(a, b), divisor);
  }
};
struct F16cDivide {
  __m256 divisor;
  RR_F16C_TARGET __m256 operator()(__m256 x) const { return _mm256_div_ps(x, divisor); }
};

RR_F16C_TARGET RR_ALWAYS_INLINE __m256 load_halves(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
RR_F16C_TARGET RR_ALWAYS_INLINE void store_halves(Half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <typename VectorOp, typename ScalarOp>
RR_F16C_TARGET RR_ALWAYS_INLINE void f16c_binary_loop(void* dst, const void* a, const void* b,
                                                      size_t count, VectorOp vector_op,
                                                      ScalarOp scalar_op) {
  Half* d = static_cast<Half*>(dst);
  const Half* x = static_cast<const Half*>(a);
  const Half* y = static_cast<const Half*>(b);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    store_halves(d + i, vector_op(load_halves(x + i), load_halves(y + i)));
  }
  for (; i < count; ++i) d[i] = scalar_op(x[i], y[i]);
}

template <typename VectorOp, typename ScalarOp>
RR_F16C_TARGET RR_ALWAYS_INLINE void f16c_unary_loop(void* dst, const void* src, size_t count,
                                                     VectorOp vector_op, ScalarOp scalar_op) {
  Half* d = static_cast<Half*>(dst);
  const Half* s = static_cast<const Half*>(src);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) store_halves(d + i, vector_op(load_halves(s + i)));
  for (; i < count; ++i) d[i] = scalar_op(s[i]);
}

RR_F16C_TARGET void float16_f16c_sum(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, F16cSum{}, SumOp<Half>{});
}
RR_F16C_TARGET void float16_f16c_prod(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, F16cProd{}, ProdOp<Half>{});
}
RR_F16C_TARGET void float16_f16c_max(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, F16cMax{}, MaxOp<Half>{});
}
RR_F16C_TARGET void float16_f16c_min(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, F16cMin{}, MinOp<Half>{});
}
// As SumDivideOp<Half>: the float sum is divided before the one rounding.
RR_F16C_TARGET void float16_f16c_sum_divide(void* d, const void* a, const void* b, size_t n,
                                            int k) {
  f16c_binary_loop(d, a, b, n, F16cSumDivide{_mm256_set1_ps(float(k))}, SumDivideOp<Half>{k});
}
RR_F16C_TARGET void float16_f16c_divide(void* d, const void* s, size_t n, int k) {
  f16c_unary_loop(d, s, n, F16cDivide{_mm256_set1_ps(float(k))}, DivideOp<Half>{k});
}
#undef RR_F16C_TARGET

constexpr DtypeKernels kFloat16F16cKernels = {
    {float16_f16c_sum, float16_f16c_prod, float16_f16c_max, float16_f16c_min, float16_f16c_sum, nullptr,
     nullptr, nullptr},
    float16_f16c_sum_divide, float16_f16c_divide};

// A function-local static, so that calls from other static initializers see
// the detected value, not a zero-initialized one.
bool cpu_has_f16c() {
  static const bool has_f16c = [] {
    __builtin_cpu_init();  // may run before main()
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has_f16c;
}
#else
bool cpu_has_f16c() { return false; }
#endif

std::atomic<bool> f16c_allowed{true};

const DtypeKernels& kernels_for(rrDataType_t dtype) {
#if RR_HAVE_F16C_LOOPS
  if (dtype == rrFloat16 && f16c_allowed.load(std::memory_order_relaxed) && cpu_has_f16c()) {
    return kFloat16F16cKernels;
  }
#endif
  return kKernels[dtype];
}

}  // namespace

size_t dtype_size(rrDataType_t dtype) {
  switch (dtype) {
    case rrInt8:
    case rrUint8:
      return 1;
    case rrFloat16:
    case rrBfloat16:
      return 2;
    case rrInt32:
    case rrUint32:
    case rrFloat32:
      return 4;
    case rrInt64:
    case rrUint64:
    case rrFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* dtype_name(rrDataType_t dtype) {
  switch (dtype) {
    case rrInt8: return "int8";
    case rrUint8: return "uint8";
    case rrInt32: return "int32";
    case rrUint32: return "uint32";
    case rrInt64: return "int64";
    case rrUint64: return "uint64";
    case rrFloat16: return "float16";
    case rrFloat32: return "float32";
    case rrFloat64: return "float64";
    case rrBfloat16: return "bfloat16";
    default: return "unknown";
  }
}

const char* op_name(rrRedOp_t op) {
  switch (op) {
    case rrSum: return "sum";
    case rrProd: return "prod";
    case rrMax: return "max";
    case rrMin: return "min";
    case rrAvg: return "avg";
    case rrBand: return "band";
    case rrBor: return "bor";
    case rrBxor: return "bxor";
    default: return "unknown";
  }
}

bool valid_dtype(int dtype) { return dtype >= 0 && dtype < rrNumTypes; }
bool valid_op(int op) { return op >= 0 && op < rrNumOps; }

bool is_bitwise(rrRedOp_t op) { return op == rrBand || op == rrBor || op == rrBxor; }

bool is_floating(rrDataType_t dtype) {
  return dtype == rrFloat16 || dtype == rrBfloat16 || dtype == rrFloat32 || dtype == rrFloat64;
}

bool op_defined(rrDataType_t dtype, rrRedOp_t op) {
  return valid_dtype(dtype) && valid_op(op) && !(is_bitwise(op) && is_floating(dtype));
}

void reduce(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
            rrRedOp_t op) {
  assert(op_defined(dtype, op));
  if (count == 0) return;
  kernels_for(dtype).binary[op](dst, a, b, count);  // avg's slot sums; the division comes last
}

void reduce_last(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
                 rrRedOp_t op, int divisor) {
  if (op != rrAvg) {
    reduce(dst, a, b, count, dtype, op);
    return;
  }
  assert(valid_dtype(dtype) && divisor >= 1);
  if (count == 0) return;
  kernels_for(dtype).sum_divide(dst, a, b, count, divisor);
}

void finish(void* dst, const void* src, size_t count, rrDataType_t dtype, rrRedOp_t op,
            int divisor) {
  assert(op_defined(dtype, op));
  if (count == 0) return;
  if (op == rrAvg) {
    assert(divisor >= 1);
    kernels_for(dtype).divide(dst, src, count, divisor);
  } else if (dst != src) {
    std::memcpy(dst, src, count * dtype_size(dtype));
  }
}

bool float16_uses_f16c() { return f16c_allowed.load(std::memory_order_relaxed) && cpu_has_f16c(); }

void allow_f16c(bool allowed) { f16c_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace rr::reduce
