// CUDA reductions (kernels/device_reduce.hpp) on a GPU: every dtype x op, on
// fresh random data, sizes around the vector width and a large odd one,
// aligned and misaligned, in place and out of place, and with the first input
// in mapped pinned host memory (the fused reduce-copy). Each element must be
// bit for bit the host path's (lib/reduce/, itself tested against exact
// references in tests/unit/reduce_test.cpp) and within the dtype's rounding of
// a double-precision reference. The output is poisoned first with the
// complement of each expected element, so an element the kernel did not
// write fails; one guard element on each side must stay untouched.
//
// Without a usable GPU the binary prints why and exits 77 (a skip in Meson).
// RR_TEST_SEED=N repeats a run's data; the seed is printed on every failure.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/device_reduce.hpp"
#include "reduce/half.hpp"
#include "reduce/reduce.hpp"
#include "reduce/with_dtype.hpp"

namespace rr::kernels {
namespace {

uint64_t g_seed = 0;

#define ASSERT_CUDA(call)                                                                  \
  do {                                                                                     \
    cudaError_t rr_error_ = (call);                                                        \
    ASSERT_EQ(rr_error_, cudaSuccess) << #call << ": " << cudaGetErrorString(rr_error_);   \
  } while (0)

#define ASSERT_OK(call)                                      \
  do {                                                       \
    ::rr::Status rr_status_ = (call);                        \
    ASSERT_TRUE(rr_status_.ok()) << rr_status_.message();    \
  } while (0)

// ---------------------------------------------------------------------------
// Memory owners.

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&data, bytes) != cudaSuccess) data = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Pinned host memory mapped into the device's address space.
struct MappedHostBuffer {
  void* host = nullptr;
  void* device = nullptr;
  explicit MappedHostBuffer(size_t bytes) {
    if (bytes == 0) return;
    if (cudaHostAlloc(&host, bytes, cudaHostAllocMapped) != cudaSuccess) {
      host = nullptr;
      return;
    }
    if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess) device = nullptr;
  }
  ~MappedHostBuffer() { cudaFreeHost(host); }
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
};

struct Stream {
  cudaStream_t handle = nullptr;
  Stream() {
    if (cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking) != cudaSuccess) handle = nullptr;
  }
  ~Stream() {
    if (handle != nullptr) cudaStreamDestroy(handle);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

// ---------------------------------------------------------------------------
// Random inputs, as tests/unit/reduce_test.cpp draws them: integers mostly
// full-range (sums and products wrap), some small; floats with random sign
// and mantissa and exponents in a band where products stay finite, some
// zeros of either sign; subnormals for float16. No NaNs: the GPU's NaN
// results are canonical, the host's keep a payload (device_reduce.hpp).

template <typename T>
T random_value(std::mt19937_64& rng) {
  if constexpr (std::is_integral_v<T>) {
    if (rng() % 8 == 0) return static_cast<T>(static_cast<int>(rng() % 7) - 3);
    return static_cast<T>(rng());
  } else if constexpr (std::is_same_v<T, float>) {
    if (rng() % 32 == 0) return rng() % 2 ? 0.0f : -0.0f;
    uint32_t exponent = 127 - 30 + static_cast<uint32_t>(rng() % 61);
    return bits_float((static_cast<uint32_t>(rng()) & 0x807fffffu) | exponent << 23);
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

// ---------------------------------------------------------------------------
// The double-precision reference, and how far from it a result may be.

template <typename T>
double to_double(T x) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(to_float(x));
  } else {
    return static_cast<double>(x);
  }
}

template <typename T>
constexpr int kMantissaBits = std::numeric_limits<T>::digits;  // float 24, double 53
template <> constexpr int kMantissaBits<Half> = 11;
template <> constexpr int kMantissaBits<BFloat16> = 8;

// The smallest positive subnormal: the spacing of T's values near zero.
template <typename T>
double smallest_step() {
  if constexpr (std::is_same_v<T, Half>) {
    return std::ldexp(1.0, -24);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return std::ldexp(1.0, -133);
  } else {
    return static_cast<double>(std::numeric_limits<T>::denorm_min());
  }
}

double ref_max(double a, double b) { return a > b ? a : b; }  // ties: b, as functors.hpp
double ref_min(double a, double b) { return a < b ? a : b; }

// Integers: exact arithmetic modulo 2^64, truncated to T (the wrap of
// functors.hpp); avg truncates the wrapped sum toward zero.
template <typename T>
T integer_reference(rrRedOp_t op, bool divide, T a, T b, int divisor) {
  T r;
  switch (op) {
    case rrProd: r = static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); break;
    case rrMax: r = a < b ? b : a; break;
    case rrMin: r = a < b ? a : b; break;
    case rrBand: r = static_cast<T>(static_cast<uint64_t>(a) & static_cast<uint64_t>(b)); break;
    case rrBor: r = static_cast<T>(static_cast<uint64_t>(a) | static_cast<uint64_t>(b)); break;
    case rrBxor: r = static_cast<T>(static_cast<uint64_t>(a) ^ static_cast<uint64_t>(b)); break;
    default: r = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); break;
  }
  if (op == rrAvg && divide) {
    if constexpr (std::is_signed_v<T>) {
      r = static_cast<T>(static_cast<int64_t>(r) / divisor);
    } else {
      r = static_cast<T>(static_cast<uint64_t>(r) / static_cast<uint64_t>(divisor));
    }
  }
  return r;
}

// Whether got is the reference result for (a op b) [/ divisor], computed
// exactly for integers and in double for floats: max and min exactly, other
// floats within one unit in the last place of T (the result is rounded once
// to T, or for avg of float16 and bfloat16 a float sum and quotient are, then
// T's rounding). b is ignored for finish (unary).
template <typename T>
bool near_reference(rrRedOp_t op, bool unary, bool divide, T a, T b, int divisor, T got,
                    double* want_out) {
  if constexpr (std::is_integral_v<T>) {
    T want = unary ? (op == rrAvg && divide ? integer_reference<T>(rrAvg, true, a, T(0), divisor)
                                            : a)
                   : integer_reference<T>(op, divide, a, b, divisor);
    *want_out = static_cast<double>(want);
    return want == got;
  } else {
    const double x = to_double(a);
    const double y = to_double(b);
    double want;
    if (unary) {
      want = op == rrAvg ? x / divisor : x;
    } else {
      switch (op) {
        case rrProd: want = x * y; break;
        case rrMax: want = ref_max(x, y); break;
        case rrMin: want = ref_min(x, y); break;
        default: want = x + y; break;
      }
      if (op == rrAvg && divide) want /= divisor;
    }
    *want_out = want;
    const double g = to_double(got);
    if (op == rrMax || op == rrMin || (unary && op != rrAvg)) return g == want;
    const double ulp = std::ldexp(std::fabs(want), 1 - kMantissaBits<T>);
    return std::fabs(g - want) <= ulp + smallest_step<T>();
  }
}

// ---------------------------------------------------------------------------
// Running one case.

template <typename T>
bool same_bits(const T& x, const T& y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

template <typename T>
T complement(const T& x) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &x, sizeof(T));
  for (unsigned char& c : bytes) c = static_cast<unsigned char>(~c);
  T y;
  std::memcpy(&y, bytes, sizeof(T));
  return y;
}

template <typename T>
std::string show(const T& x) {
  char text[80];
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    std::snprintf(text, sizeof text, "%.9g (0x%04x)", static_cast<double>(to_float(x)), x.bits);
  } else if constexpr (std::is_floating_point_v<T>) {
    std::snprintf(text, sizeof text, "%.17g", static_cast<double>(x));
  } else {
    std::snprintf(text, sizeof text, "%lld", static_cast<long long>(x));
  }
  return text;
}

enum class Call { kReduce, kReduceLast, kFinish };

const char* call_name(Call call) {
  switch (call) {
    case Call::kReduce: return "device_reduce";
    case Call::kReduceLast: return "device_reduce_last";
    default: return "device_finish";
  }
}

// Where the operands live.
enum class Placement {
  kSeparate,      // dst, a, b: three device buffers
  kInPlaceA,      // dst == a
  kInPlaceB,      // dst == b (for finish: dst == src)
  kMappedHostA,   // a in mapped pinned host memory, dst and b on the device
};

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kSeparate: return "separate buffers";
    case Placement::kInPlaceA: return "in place (dst == a)";
    case Placement::kInPlaceB: return "in place (dst == b)";
    default: return "a in mapped pinned host memory";
  }
}

struct Case {
  Call call;
  Placement placement;
  size_t count;
  size_t offset;  // elements: 1 misaligns every pointer
  int divisor;
};

// Runs one case on fresh data and checks every element, and the guard
// elements at offset - 1 (or the front) and count.
template <typename T>
void run_case(rrDataType_t dtype, rrRedOp_t op, const Case& c, std::mt19937_64& rng,
              cudaStream_t stream) {
  SCOPED_TRACE(std::string(call_name(c.call)) + ", " + placement_name(c.placement) + ", count " +
               std::to_string(c.count) + ", offset " + std::to_string(c.offset) + ", divisor " +
               std::to_string(c.divisor) + ", RR_TEST_SEED=" + std::to_string(g_seed));
  const bool unary = c.call == Call::kFinish;
  // [16 guard bytes | offset more | count | one guard element]: buffers start
  // 256-byte aligned, so with offset 0 every pointer is 16-byte aligned (the
  // vector kernel) and offset 1 misaligns each by one element (the scalar one).
  const size_t first = 16 / sizeof(T) + c.offset;
  const size_t n = first + c.count + 1;
  const size_t bytes = n * sizeof(T);

  std::vector<T> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = random_value<T>(rng);
    // Some ties: max and min must pick the same element as the host.
    b[i] = rng() % 16 == 0 ? a[i] : random_value<T>(rng);
  }
  const T* pa = a.data() + first;
  const T* pb = b.data() + first;

  // The host path's answer.
  std::vector<T> want(c.count);
  switch (c.call) {
    case Call::kReduce: reduce::reduce(want.data(), pa, pb, c.count, dtype, op); break;
    case Call::kReduceLast:
      reduce::reduce_last(want.data(), pa, pb, c.count, dtype, op, c.divisor);
      break;
    case Call::kFinish: reduce::finish(want.data(), pa, c.count, dtype, op, c.divisor); break;
  }

  // The output starts as the complement of the answer (poison), except where
  // it is an input.
  std::vector<T> poison(n);
  for (size_t i = 0; i < n; ++i) poison[i] = random_value<T>(rng);
  for (size_t i = 0; i < c.count; ++i) poison[first + i] = complement(want[i]);

  DeviceBuffer dev_a(bytes), dev_b(bytes), dev_dst(bytes);
  ASSERT_NE(dev_a.data, nullptr);
  ASSERT_NE(dev_b.data, nullptr);
  ASSERT_NE(dev_dst.data, nullptr);
  MappedHostBuffer host_a(c.placement == Placement::kMappedHostA ? bytes : 0);

  T* base_a = static_cast<T*>(dev_a.data);
  if (c.placement == Placement::kMappedHostA) {
    ASSERT_NE(host_a.device, nullptr);
    std::memcpy(host_a.host, a.data(), bytes);
    base_a = static_cast<T*>(host_a.device);
  } else {
    ASSERT_CUDA(cudaMemcpy(dev_a.data, a.data(), bytes, cudaMemcpyHostToDevice));
  }
  ASSERT_CUDA(cudaMemcpy(dev_b.data, b.data(), bytes, cudaMemcpyHostToDevice));
  T* base_b = static_cast<T*>(dev_b.data);
  T* base_dst = static_cast<T*>(dev_dst.data);
  std::vector<T> before;  // what the dst buffer holds before the call
  switch (c.placement) {
    case Placement::kInPlaceA:
      base_dst = base_a;
      before = a;
      break;
    case Placement::kInPlaceB:
      base_dst = unary ? base_a : base_b;
      before = unary ? a : b;
      break;
    default:
      ASSERT_CUDA(cudaMemcpy(dev_dst.data, poison.data(), bytes, cudaMemcpyHostToDevice));
      before = poison;
      break;
  }

  // The copies above ran on the legacy default stream, and an H2D copy from
  // pageable memory may return before its DMA is done: wait for them all.
  ASSERT_CUDA(cudaDeviceSynchronize());

  T* d = base_dst + first;
  const T* x = base_a + first;
  const T* y = base_b + first;
  switch (c.call) {
    case Call::kReduce: ASSERT_OK(device_reduce(d, x, y, c.count, dtype, op, stream)); break;
    case Call::kReduceLast:
      ASSERT_OK(device_reduce_last(d, x, y, c.count, dtype, op, c.divisor, stream));
      break;
    case Call::kFinish: ASSERT_OK(device_finish(d, x, c.count, dtype, op, c.divisor, stream)); break;
  }
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  std::vector<T> got(n);
  ASSERT_CUDA(cudaMemcpy(got.data(), base_dst, bytes, cudaMemcpyDeviceToHost));

  size_t host_mismatches = 0, reference_misses = 0;
  for (size_t i = 0; i < c.count; ++i) {
    const T& g = got[first + i];
    if (!same_bits(g, want[i])) {
      if (host_mismatches++ == 0) {
        ADD_FAILURE() << "element " << i << " is " << show(g) << ", the host path gives "
                      << show(want[i]) << " (a = " << show(pa[i])
                      << (unary ? std::string() : ", b = " + show(pb[i])) << ")";
      }
    }
    double reference = 0;
    if (!near_reference(op, unary, c.call != Call::kReduce, pa[i], pb[i], c.divisor, g,
                        &reference)) {
      if (reference_misses++ == 0) {
        ADD_FAILURE() << "element " << i << " is " << show(g)
                      << ", not within rounding of the double reference " << reference
                      << " (a = " << show(pa[i])
                      << (unary ? std::string() : ", b = " + show(pb[i])) << ")";
      }
    }
  }
  EXPECT_EQ(host_mismatches, 0u) << "elements unlike the host path's";
  EXPECT_EQ(reference_misses, 0u) << "elements off the double reference";
  for (size_t i = 0; i < first; ++i) {
    EXPECT_TRUE(same_bits(got[i], before[i])) << "wrote before the start, element " << i;
  }
  EXPECT_TRUE(same_bits(got[n - 1], before[n - 1])) << "wrote past the end";
}

// ---------------------------------------------------------------------------
// Every dtype x op.

template <typename F>
void with_type(rrDataType_t dtype, F&& f) {
  if (!rr::reduce::with_dtype(dtype, f)) FAIL() << "unknown dtype " << dtype;
}

const rrDataType_t kDtypes[] = {rrInt8,    rrUint8,   rrInt32,   rrUint32,  rrInt64,
                                rrUint64,  rrFloat16, rrFloat32, rrFloat64, rrBfloat16};
const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg};
// Around the vector width (16 bytes: 1 to 16 elements) and the tile, and a
// large odd count that takes many tiles, a partial tile and a scalar tail.
const size_t kCounts[] = {1, 3, 4097, (size_t{1} << 20) + 1};

class DeviceReduceEveryDtypeOp
    : public ::testing::TestWithParam<std::tuple<rrDataType_t, rrRedOp_t>> {
 protected:
  void SetUp() override { ASSERT_NE(stream_.handle, nullptr); }
  Stream stream_;
};

TEST_P(DeviceReduceEveryDtypeOp, MatchesHostPathAndReference) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(g_seed ^ (uint64_t(dtype) << 32) ^ (uint64_t(op) << 40));
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t count : kCounts) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        run_case<T>(dtype, op, {Call::kReduce, Placement::kSeparate, count, offset, 1}, rng,
                    stream_.handle);
        for (int divisor : {1, 3}) {
          run_case<T>(dtype, op, {Call::kReduceLast, Placement::kSeparate, count, offset, divisor},
                      rng, stream_.handle);
          run_case<T>(dtype, op, {Call::kFinish, Placement::kSeparate, count, offset, divisor},
                      rng, stream_.handle);
        }
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

TEST_P(DeviceReduceEveryDtypeOp, WorksInPlace) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(g_seed ^ 0x1a ^ (uint64_t(dtype) << 32) ^ (uint64_t(op) << 40));
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t count : {size_t{4097}, size_t{65537}}) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        for (Placement p : {Placement::kInPlaceA, Placement::kInPlaceB}) {
          run_case<T>(dtype, op, {Call::kReduce, p, count, offset, 1}, rng, stream_.handle);
          run_case<T>(dtype, op, {Call::kReduceLast, p, count, offset, 3}, rng, stream_.handle);
        }
        run_case<T>(dtype, op, {Call::kFinish, Placement::kInPlaceB, count, offset, 3}, rng,
                    stream_.handle);
      }
    }
  });
}

// The fused reduce-copy: dst = a op b with a in mapped pinned host memory.
TEST_P(DeviceReduceEveryDtypeOp, ReadsMappedPinnedHostInput) {
  const auto [dtype, op] = GetParam();
  std::mt19937_64 rng(g_seed ^ 0x2b ^ (uint64_t(dtype) << 32) ^ (uint64_t(op) << 40));
  with_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t count : {size_t{1}, size_t{4097}, (size_t{1} << 20) + 1}) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        run_case<T>(dtype, op, {Call::kReduce, Placement::kMappedHostA, count, offset, 1}, rng,
                    stream_.handle);
        run_case<T>(dtype, op, {Call::kReduceLast, Placement::kMappedHostA, count, offset, 3},
                    rng, stream_.handle);
      }
    }
  });
}

std::string case_name(const ::testing::TestParamInfo<DeviceReduceEveryDtypeOp::ParamType>& info) {
  return std::string(reduce::dtype_name(std::get<0>(info.param))) + "_" +
         reduce::op_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndOps, DeviceReduceEveryDtypeOp,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps)),
                         case_name);

// The bitwise ops, for the integer dtypes (the only ones that have them).
const rrDataType_t kIntegerDtypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64};
const rrRedOp_t kBitwiseOps[] = {rrBand, rrBor, rrBxor};
INSTANTIATE_TEST_SUITE_P(IntegerDtypesBitwiseOps, DeviceReduceEveryDtypeOp,
                         ::testing::Combine(::testing::ValuesIn(kIntegerDtypes),
                                            ::testing::ValuesIn(kBitwiseOps)),
                         case_name);

// A bitwise op on a floating dtype is refused before anything is launched.
TEST(DeviceReduce, BitwiseOpOnAFloatingDtypeIsRefused) {
  DeviceBuffer buffer(64);
  for (rrDataType_t dtype : {rrFloat16, rrFloat32, rrFloat64, rrBfloat16}) {
    for (rrRedOp_t op : kBitwiseOps) {
      Status s = device_reduce(buffer.data, buffer.data, buffer.data, 4, dtype, op, nullptr);
      EXPECT_EQ(s.code(), Code::kInvalidArgument) << reduce::dtype_name(dtype) << " " << reduce::op_name(op);
      EXPECT_NE(s.message().find(std::string("op ") + reduce::op_name(op) + " is not defined for datatype " +
                                 reduce::dtype_name(dtype)),
                std::string::npos)
          << s.message();
    }
  }
}

// ---------------------------------------------------------------------------
// Single behaviours.

// Max and min return an input NaN itself, bit for bit, as the host does;
// an arithmetic result on a NaN is a NaN (the GPU's canonical one).
TEST(DeviceReduce, MaxMinPropagateInputNaNAndSumGivesNaN) {
  const size_t count = 37;  // vectors and a tail
  const float nan = bits_float(0x7fc01234u);
  std::vector<float> a(count, 1.0f), b(count, 2.0f);
  for (size_t i = 0; i < count; ++i) (i % 2 ? b : a)[i] = nan;
  DeviceBuffer dev_a(count * 4), dev_b(count * 4), dev_dst(count * 4);
  ASSERT_CUDA(cudaMemcpy(dev_a.data, a.data(), count * 4, cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dev_b.data, b.data(), count * 4, cudaMemcpyHostToDevice));
  for (rrRedOp_t op : {rrMax, rrMin, rrSum}) {
    ASSERT_OK(device_reduce(dev_dst.data, dev_a.data, dev_b.data, count, rrFloat32, op, nullptr));
    std::vector<float> got(count);
    ASSERT_CUDA(cudaMemcpy(got.data(), dev_dst.data, count * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      if (op == rrSum) {
        EXPECT_TRUE(std::isnan(got[i])) << "sum, element " << i;
      } else {
        EXPECT_EQ(float_bits(got[i]), 0x7fc01234u) << reduce::op_name(op) << ", element " << i;
      }
    }
  }
}

TEST(DeviceReduce, RejectsUnknownDtypeOpAndDivisor) {
  DeviceBuffer buffer(64);
  Status s = device_reduce(buffer.data, buffer.data, buffer.data, 4, static_cast<rrDataType_t>(42),
                           rrSum, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype 42"), std::string::npos) << s.message();
  s = device_reduce(buffer.data, buffer.data, buffer.data, 4, rrFloat32,
                    static_cast<rrRedOp_t>(9), nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  s = device_reduce_last(buffer.data, buffer.data, buffer.data, 4, rrFloat32, rrAvg, 0, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("divisor 0"), std::string::npos) << s.message();
  s = device_finish(nullptr, buffer.data, 4, rrFloat32, rrSum, 1, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  // Nothing to do: no pointer is looked at.
  EXPECT_TRUE(device_reduce(nullptr, nullptr, nullptr, 0, rrFloat32, rrSum, nullptr).ok());
}

}  // namespace
}  // namespace rr::kernels

int main(int argc, char** argv) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("SKIP: no usable GPU (cudaGetDeviceCount: %s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "0 devices");
    return 77;
  }
  const char* seed = std::getenv("RR_TEST_SEED");
  rr::kernels::g_seed = seed != nullptr ? std::strtoull(seed, nullptr, 0) : std::random_device{}();
  cudaDeviceProp props{};
  cudaGetDeviceProperties(&props, 0);
  std::printf("GPU 0: %s (compute capability %d.%d); RR_TEST_SEED=%llu\n", props.name, props.major,
              props.minor, static_cast<unsigned long long>(rr::kernels::g_seed));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
