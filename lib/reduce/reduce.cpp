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
// pass, so in-place calls take the vector path too.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
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
using SumDivideKernel = void (*)(void* dst, const void* a, const void* b, size_t count, int divisor);
using DivideKernel = void (*)(void* dst, const void* src, size_t count, int divisor);

// The loops of one dtype. binary[] is indexed by rrRedOp_t (sum, prod, max, min).
struct DtypeKernels {
  BinaryKernel binary[4];
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
  }                                                                                          \
  constexpr DtypeKernels name##_kernels = {                                                  \
      {name##_sum, name##_prod, name##_max, name##_min}, name##_sum_divide, name##_divide};

RR_DTYPE_KERNELS(int8, int8_t)
RR_DTYPE_KERNELS(uint8, uint8_t)
RR_DTYPE_KERNELS(int32, int32_t)
RR_DTYPE_KERNELS(uint32, uint32_t)
RR_DTYPE_KERNELS(int64, int64_t)
RR_DTYPE_KERNELS(uint64, uint64_t)
RR_DTYPE_KERNELS(float16, Half)
RR_DTYPE_KERNELS(float32, float)
RR_DTYPE_KERNELS(float64, double)
RR_DTYPE_KERNELS(bfloat16, BFloat16)
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
static_assert(rrSum == 0 && rrProd == 1 && rrMax == 2 && rrMin == 3,
              "DtypeKernels::binary is indexed by rrRedOp_t");

#if RR_HAVE_F16C_LOOPS
// float16 with F16C: one instruction converts 8 values where the portable
// code needs a dozen. A block of both inputs is widened into float buffers
// that stay in L1, reduced there by the same float functors, and narrowed
// into dst; dst may be a or b because each block is read before it is written.
constexpr size_t kF16cBlock = 256;  // floats per buffer: 1 KiB

__attribute__((target("avx2,f16c"))) RR_ALWAYS_INLINE void widen_f16c(const uint16_t* src,
                                                                      float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_bits_to_float(src[i]);  // same bits as vcvtph2ps
}

__attribute__((target("avx2,f16c"))) RR_ALWAYS_INLINE void narrow_f16c(const float* src,
                                                                       uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half_bits(src[i]);  // same bits as vcvtps2ph
}

template <typename FloatOp>
__attribute__((target("avx2,f16c"))) RR_ALWAYS_INLINE void f16c_binary_loop(
    void* dst, const void* a, const void* b, size_t count, FloatOp op) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  alignas(32) float fx[kF16cBlock];
  alignas(32) float fy[kF16cBlock];
  for (size_t base = 0; base < count; base += kF16cBlock) {
    size_t n = count - base < kF16cBlock ? count - base : kF16cBlock;
    widen_f16c(x + base, fx, n);
    widen_f16c(y + base, fy, n);
    for (size_t i = 0; i < n; ++i) fx[i] = op(fx[i], fy[i]);
    narrow_f16c(fx, d + base, n);
  }
}

template <typename FloatOp>
__attribute__((target("avx2,f16c"))) RR_ALWAYS_INLINE void f16c_unary_loop(void* dst,
                                                                            const void* src,
                                                                            size_t count,
                                                                            FloatOp op) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  alignas(32) float fs[kF16cBlock];
  for (size_t base = 0; base < count; base += kF16cBlock) {
    size_t n = count - base < kF16cBlock ? count - base : kF16cBlock;
    widen_f16c(s + base, fs, n);
    for (size_t i = 0; i < n; ++i) fs[i] = op(fs[i]);
    narrow_f16c(fs, d + base, n);
  }
}

#define RR_F16C_TARGET __attribute__((target("avx2,f16c")))
RR_F16C_TARGET void float16_f16c_sum(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, SumOp<float>{});
}
RR_F16C_TARGET void float16_f16c_prod(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, ProdOp<float>{});
}
RR_F16C_TARGET void float16_f16c_max(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, MaxOp<float>{});
}
RR_F16C_TARGET void float16_f16c_min(void* d, const void* a, const void* b, size_t n) {
  f16c_binary_loop(d, a, b, n, MinOp<float>{});
}
// As SumDivideOp<Half>: the float sum is divided before the one rounding.
RR_F16C_TARGET void float16_f16c_sum_divide(void* d, const void* a, const void* b, size_t n,
                                            int k) {
  f16c_binary_loop(d, a, b, n, SumDivideOp<float>{k});
}
RR_F16C_TARGET void float16_f16c_divide(void* d, const void* s, size_t n, int k) {
  f16c_unary_loop(d, s, n, DivideOp<float>{k});
}
#undef RR_F16C_TARGET

constexpr DtypeKernels kFloat16F16cKernels = {
    {float16_f16c_sum, float16_f16c_prod, float16_f16c_max, float16_f16c_min},
    float16_f16c_sum_divide, float16_f16c_divide};

bool cpu_has_f16c() {
  __builtin_cpu_init();  // may run before main(), from a static initializer
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
const bool kCpuHasF16c = cpu_has_f16c();
#else
const bool kCpuHasF16c = false;
#endif

std::atomic<bool> f16c_allowed{true};

const DtypeKernels& kernels_for(rrDataType_t dtype) {
#if RR_HAVE_F16C_LOOPS
  if (dtype == rrFloat16 && kCpuHasF16c && f16c_allowed.load(std::memory_order_relaxed)) {
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
    default: return "unknown";
  }
}

bool valid_dtype(int dtype) { return dtype >= 0 && dtype < rrNumTypes; }
bool valid_op(int op) { return op >= 0 && op < rrNumOps; }

void reduce(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
            rrRedOp_t op) {
  assert(valid_dtype(dtype) && valid_op(op));
  if (count == 0) return;
  int slot = op == rrAvg ? rrSum : op;  // avg sums; the division comes last
  kernels_for(dtype).binary[slot](dst, a, b, count);
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
  assert(valid_dtype(dtype) && valid_op(op));
  if (count == 0) return;
  if (op == rrAvg) {
    assert(divisor >= 1);
    kernels_for(dtype).divide(dst, src, count, divisor);
  } else if (dst != src) {
    std::memcpy(dst, src, count * dtype_size(dtype));
  }
}

bool float16_uses_f16c() { return kCpuHasF16c && f16c_allowed.load(std::memory_order_relaxed); }

void allow_f16c(bool allowed) { f16c_allowed.store(allowed, std::memory_order_relaxed); }

}  // namespace rr::reduce
