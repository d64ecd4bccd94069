// CUDA reductions (device_reduce.hpp). One element-wise kernel in two shapes
// (16-byte vectors with a scalar tail, or scalar only), instantiated for every
// dtype x functor of lib/reduce/functors.hpp with one input (the division of
// an average) or two (every reduction).

#include "kernels/device_reduce.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "reduce/functors.hpp"
#include "reduce/half.hpp"

namespace rr::kernels {
namespace {

constexpr int kThreads = 256;
// 16-byte vectors of each input a thread loads before it uses the first: the
// loads of one tile are in flight together, which HBM needs to reach its rate
// and mapped host memory (microseconds away) needs even more.
constexpr int kUnroll = 4;
constexpr size_t kVectorBytes = 16;
// Blocks per multiprocessor the grid is capped at: more than can be resident
// at once, so every multiprocessor is full; the kernels loop over the rest.
constexpr int kBlocksPerMultiprocessor = 8;
constexpr int kMaxDevices = 64;
constexpr int kFallbackMultiprocessors = 132;  // an H200's; used only if the query fails

// One 16-byte access seen as elements. T is a trivial type (an integer,
// float, double, Half or BFloat16), so the union is too.
template <typename T>
union Vector {
  uint4 bits;
  T elements[kVectorBytes / sizeof(T)];
};

// x = op(x, y) (kInputs == 2) or op(x) (kInputs == 1), lane by lane.
template <int kInputs, typename T, typename Op>
__device__ __forceinline__ void apply_vector(const Op& op, Vector<T>& x, const Vector<T>& y) {
#pragma unroll
  for (size_t lane = 0; lane < kVectorBytes / sizeof(T); ++lane) {
    if constexpr (kInputs == 2) {
      x.elements[lane] = op(x.elements[lane], y.elements[lane]);
    } else {
      x.elements[lane] = op(x.elements[lane]);
    }
  }
}

// dst[i] = op(a[i], b[i]) (kInputs == 2) or op(a[i]) (kInputs == 1), with
// dst, a and b 16-byte aligned. Blocks take tiles of kThreads x kUnroll
// vectors in turn (thread t of a block owns vectors t, t + kThreads, ... of
// the tile, so each load instruction is coalesced across the warp); then the
// whole grid takes the vectors after the last whole tile, and the elements
// after the last whole vector. No pointer is __restrict__: dst may be a or b.
template <int kInputs, typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_vector_kernel(T* dst, const T* a, const T* b, size_t count, Op op) {
  constexpr size_t kLanes = kVectorBytes / sizeof(T);
  constexpr size_t kTile = size_t(kThreads) * kUnroll;
  const size_t vectors = count / kLanes;
  const size_t tiles = vectors / kTile;
  uint4* dst_vectors = reinterpret_cast<uint4*>(dst);
  const uint4* a_vectors = reinterpret_cast<const uint4*>(a);
  const uint4* b_vectors = reinterpret_cast<const uint4*>(b);

  for (size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const size_t first = tile * kTile + threadIdx.x;
    Vector<T> x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u].bits = a_vectors[first + u * kThreads];
      if constexpr (kInputs == 2) y[u].bits = b_vectors[first + u * kThreads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      apply_vector<kInputs>(op, x[u], y[u]);
      dst_vectors[first + u * kThreads] = x[u].bits;
    }
  }

  const size_t thread = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = size_t(gridDim.x) * blockDim.x;
  for (size_t v = tiles * kTile + thread; v < vectors; v += threads) {
    Vector<T> x, y;
    x.bits = a_vectors[v];
    if constexpr (kInputs == 2) y.bits = b_vectors[v];
    apply_vector<kInputs>(op, x, y);
    dst_vectors[v] = x.bits;
  }
  for (size_t i = vectors * kLanes + thread; i < count; i += threads) {
    if constexpr (kInputs == 2) {
      dst[i] = op(a[i], b[i]);
    } else {
      dst[i] = op(a[i]);
    }
  }
}

// The same, one element per access, for pointers that are not all aligned.
template <int kInputs, typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_scalar_kernel(T* dst, const T* a, const T* b, size_t count, Op op) {
  const size_t threads = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += threads) {
    if constexpr (kInputs == 2) {
      dst[i] = op(a[i], b[i]);
    } else {
      dst[i] = op(a[i]);
    }
  }
}

// The current device's multiprocessor count, asked once per device.
int multiprocessors() {
  static std::atomic<int> known[kMaxDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    return kFallbackMultiprocessors;
  }
  int count = known[device].load(std::memory_order_relaxed);
  if (count == 0) {
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        count <= 0) {
      count = kFallbackMultiprocessors;
    }
    known[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

size_t blocks_for(size_t items_per_block, size_t items) {
  const size_t cap = size_t(multiprocessors()) * kBlocksPerMultiprocessor;
  return std::clamp<size_t>((items + items_per_block - 1) / items_per_block, 1, cap);
}

// Enqueues one element-wise kernel; returns the launch's error.
template <int kInputs, typename T, typename Op>
cudaError_t launch(void* dst, const void* a, const void* b, size_t count, Op op,
                   cudaStream_t stream) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (aligned(dst) && aligned(a) && (kInputs == 1 || aligned(b))) {
    constexpr size_t kLanes = kVectorBytes / sizeof(T);
    const size_t blocks = blocks_for(size_t(kThreads) * kUnroll, count / kLanes);
    elementwise_vector_kernel<kInputs, T, Op>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d, x, y, count, op);
  } else {
    const size_t blocks = blocks_for(kThreads, count);
    elementwise_scalar_kernel<kInputs, T, Op>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d, x, y, count, op);
  }
  return cudaGetLastError();
}

// Calls f(T{}) with T the element type of a valid dtype.
template <typename F>
cudaError_t with_type(rrDataType_t dtype, F&& f) {
  switch (dtype) {
    case rrInt8: return f(int8_t{});
    case rrUint8: return f(uint8_t{});
    case rrInt32: return f(int32_t{});
    case rrUint32: return f(uint32_t{});
    case rrInt64: return f(int64_t{});
    case rrUint64: return f(uint64_t{});
    case rrFloat16: return f(Half{});
    case rrFloat32: return f(float{});
    case rrFloat64: return f(double{});
    case rrBfloat16: return f(BFloat16{});
    default: return cudaErrorInvalidValue;  // checked by the callers
  }
}

// dst = a op b; with rrAvg, a sum, or (last) the sum divided by divisor.
template <typename T>
cudaError_t launch_reduce(void* dst, const void* a, const void* b, size_t count, rrRedOp_t op,
                          bool last, int divisor, cudaStream_t stream) {
  switch (op) {
    case rrSum: return launch<2, T>(dst, a, b, count, reduce::SumOp<T>{}, stream);
    case rrProd: return launch<2, T>(dst, a, b, count, reduce::ProdOp<T>{}, stream);
    case rrMax: return launch<2, T>(dst, a, b, count, reduce::MaxOp<T>{}, stream);
    case rrMin: return launch<2, T>(dst, a, b, count, reduce::MinOp<T>{}, stream);
    case rrAvg:
      return last ? launch<2, T>(dst, a, b, count, reduce::SumDivideOp<T>{divisor}, stream)
                  : launch<2, T>(dst, a, b, count, reduce::SumOp<T>{}, stream);
    default: return cudaErrorInvalidValue;  // checked by the callers
  }
}

size_t element_bytes(rrDataType_t dtype) {
  size_t bytes = 0;
  with_type(dtype, [&](auto tag) {
    bytes = sizeof(tag);
    return cudaSuccess;
  });
  return bytes;
}

// The same names as rr::reduce::dtype_name() and op_name(); this library
// does not link the engine (the engine will link it).
const char* dtype_name(rrDataType_t dtype) {
  static const char* const kNames[rrNumTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                 "int64",   "uint64",  "float16", "float32",
                                                 "float64", "bfloat16"};
  return dtype >= 0 && dtype < rrNumTypes ? kNames[dtype] : "unknown";
}

const char* op_name(rrRedOp_t op) {
  static const char* const kNames[rrNumOps] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < rrNumOps ? kNames[op] : "unknown";
}

std::string describe(const char* call, size_t count, rrDataType_t dtype, rrRedOp_t op) {
  return std::string(call) + " (" + dtype_name(dtype) + " " + op_name(op) + ", " +
         std::to_string(count) + " elements)";
}

Status check(const char* call, size_t count, rrDataType_t dtype, rrRedOp_t op, int divisor,
             bool divides, std::initializer_list<const void*> pointers) {
  if (dtype < 0 || dtype >= rrNumTypes) {
    return InvalidArgument(std::string(call) + ": unknown dtype " + std::to_string(dtype));
  }
  if (op < 0 || op >= rrNumOps) {
    return InvalidArgument(std::string(call) + ": unknown op " + std::to_string(op));
  }
  if (divides && op == rrAvg && divisor < 1) {
    return InvalidArgument(describe(call, count, dtype, op) + ": divisor " +
                           std::to_string(divisor) + " < 1");
  }
  if (count > 0) {
    for (const void* p : pointers) {
      if (p == nullptr) return InvalidArgument(describe(call, count, dtype, op) + ": NULL buffer");
    }
  }
  return Status::Ok();
}

Status cuda_status(cudaError_t error, const char* call, size_t count, rrDataType_t dtype,
                   rrRedOp_t op) {
  if (error == cudaSuccess) return Status::Ok();
  return SystemError(describe(call, count, dtype, op) + ": " + cudaGetErrorName(error) + ": " +
                     cudaGetErrorString(error));
}

}  // namespace

Status device_reduce(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
                     rrRedOp_t op, void* stream) {
  RR_RETURN_IF_ERROR(check("device_reduce", count, dtype, op, 1, false, {dst, a, b}));
  if (count == 0) return Status::Ok();
  cudaError_t error = with_type(dtype, [&](auto tag) {
    return launch_reduce<decltype(tag)>(dst, a, b, count, op, false, 1,
                                        static_cast<cudaStream_t>(stream));
  });
  return cuda_status(error, "device_reduce", count, dtype, op);
}

Status device_reduce_last(void* dst, const void* a, const void* b, size_t count,
                          rrDataType_t dtype, rrRedOp_t op, int divisor, void* stream) {
  RR_RETURN_IF_ERROR(check("device_reduce_last", count, dtype, op, divisor, true, {dst, a, b}));
  if (count == 0) return Status::Ok();
  cudaError_t error = with_type(dtype, [&](auto tag) {
    return launch_reduce<decltype(tag)>(dst, a, b, count, op, true, divisor,
                                        static_cast<cudaStream_t>(stream));
  });
  return cuda_status(error, "device_reduce_last", count, dtype, op);
}

Status device_finish(void* dst, const void* src, size_t count, rrDataType_t dtype, rrRedOp_t op,
                     int divisor, void* stream) {
  RR_RETURN_IF_ERROR(check("device_finish", count, dtype, op, divisor, true, {dst, src}));
  if (count == 0) return Status::Ok();
  auto cuda_stream = static_cast<cudaStream_t>(stream);
  cudaError_t error = cudaSuccess;
  if (op == rrAvg) {
    error = with_type(dtype, [&](auto tag) {
      using T = decltype(tag);
      return launch<1, T>(dst, src, nullptr, count, reduce::DivideOp<T>{divisor}, cuda_stream);
    });
  } else if (dst != src) {
    error = cudaMemcpyAsync(dst, src, count * element_bytes(dtype), cudaMemcpyDefault,
                            cuda_stream);
  }
  return cuda_status(error, "device_finish", count, dtype, op);
}

}  // namespace rr::kernels
