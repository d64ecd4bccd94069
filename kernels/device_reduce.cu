// CUDA reductions (device_reduce.hpp). One element-wise kernel in two shapes
// (16-byte vectors with a scalar tail, or scalar only; elementwise.hpp holds
// what each thread does), instantiated for every dtype x functor of
// lib/reduce/functors.hpp with one input (the division of an average) or two
// (every reduction).

#include "kernels/device_reduce.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/elementwise.hpp"
#include "reduce/functors.hpp"
#include "reduce/half.hpp"
#include "reduce/with_dtype.hpp"

namespace rr::kernels {
namespace {

// Blocks per multiprocessor the grid is capped at: more than can be resident
// at once, so every multiprocessor is full; the threads loop over the rest.
constexpr int kBlocksPerMultiprocessor = 8;
constexpr int kMaxDevices = 64;
constexpr int kFallbackMultiprocessors = 132;  // an H200's; used only if the query fails

template <int kInputs, typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_vector_kernel(T* dst, const T* a, const T* b, size_t count, Op op) {
  elementwise_vectors<kInputs>(dst, a, b, count, op, {blockIdx.x, gridDim.x, threadIdx.x});
}

template <int kInputs, typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_scalar_kernel(T* dst, const T* a, const T* b, size_t count, Op op) {
  elementwise_scalars<kInputs>(dst, a, b, count, op, {blockIdx.x, gridDim.x, threadIdx.x});
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

// Enqueues one element-wise kernel; returns the launch's error.
template <int kInputs, typename T, typename Op>
cudaError_t launch(void* dst, const void* a, const void* b, size_t count, Op op,
                   cudaStream_t stream) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const size_t max_blocks = size_t(multiprocessors()) * kBlocksPerMultiprocessor;
  // cudaGetLastError below must report this launch, not an error some
  // earlier call (the caller's, or multiprocessors()) left on the thread.
  (void)cudaGetLastError();
  if (aligned(dst) && aligned(a) && (kInputs == 1 || aligned(b))) {
    const size_t blocks = vector_blocks(count, sizeof(T), max_blocks);
    elementwise_vector_kernel<kInputs, T, Op>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d, x, y, count, op);
  } else {
    const size_t blocks = scalar_blocks(count, max_blocks);
    elementwise_scalar_kernel<kInputs, T, Op>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(d, x, y, count, op);
  }
  return cudaGetLastError();
}

// Calls f(T{}) with T the element type of a valid dtype.
template <typename F>
cudaError_t with_type(rrDataType_t dtype, F&& f) {
  cudaError_t result = cudaErrorInvalidValue;  // an unknown dtype: checked by the callers
  reduce::with_dtype(dtype, [&](auto tag) { result = f(tag); });
  return result;
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
    default: break;
  }
  // The bitwise ops exist for the integer types only (check() refuses the others).
  if constexpr (reduce::kIsInteger<T>) {
    switch (op) {
      case rrBand: return launch<2, T>(dst, a, b, count, reduce::BandOp<T>{}, stream);
      case rrBor: return launch<2, T>(dst, a, b, count, reduce::BorOp<T>{}, stream);
      case rrBxor: return launch<2, T>(dst, a, b, count, reduce::BxorOp<T>{}, stream);
      default: break;
    }
  }
  return cudaErrorInvalidValue;  // checked by the callers
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
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == rrNumOps, "a name for every rrRedOp_t");
  return op >= 0 && op < rrNumOps ? kNames[op] : "unknown";
}

bool is_bitwise(rrRedOp_t op) { return op == rrBand || op == rrBor || op == rrBxor; }

bool is_floating(rrDataType_t dtype) {
  return dtype == rrFloat16 || dtype == rrBfloat16 || dtype == rrFloat32 || dtype == rrFloat64;
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
  if (is_bitwise(op) && is_floating(dtype)) {
    return InvalidArgument(std::string(call) + ": op " + op_name(op) + " is not defined for datatype " +
                           dtype_name(dtype));
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
