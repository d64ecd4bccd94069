// Reduction servers (reduce_server.hpp).

#include "kernels/reduce_server.hpp"

#include <cuda_runtime.h>

#include <string>

#include "kernels/elementwise.hpp"
#include "reduce/functors.hpp"
#include "reduce/half.hpp"
#include "reduce/with_dtype.hpp"

namespace rr::kernels {
namespace {

constexpr unsigned kPollNanoseconds = 500;

enum Action : int { kRun = 1, kExit = 2 };

template <typename T, typename Op>
__device__ void run_job(const ReduceMailbox& job, const Op& op) {
  T* dst = static_cast<T*>(job.dst);
  const T* a = static_cast<const T*>(job.mine);
  const T* b = static_cast<const T*>(job.arrived);
  const ThreadIndex index{blockIdx.x, gridDim.x, threadIdx.x};
  const bool vectors = reinterpret_cast<uintptr_t>(dst) % kVectorBytes == 0 &&
                       reinterpret_cast<uintptr_t>(a) % kVectorBytes == 0 &&
                       reinterpret_cast<uintptr_t>(b) % kVectorBytes == 0;
  if (vectors) {
    elementwise_vectors<2>(dst, a, b, job.count, op, index);
  } else {
    elementwise_scalars<2>(dst, a, b, job.count, op, index);
  }
}

// Plain: the op of every job, but with kAvg the jobs marked last, which sum
// and divide by the job's divisor (the rank count).
//
// Block 0 alone reads the host's mailbox (one PCIe read per poll) and mirrors
// what changed into `state->mirror` in device memory, job fields first; every
// block, block 0 too, acts on the mirror, so all see the same jobs in the
// same order and agree on when to exit.
template <typename T, typename Plain, bool kAvg>
__global__ void __launch_bounds__(kThreads)
    reduce_server_kernel(ReduceMailbox* box, ReduceServerState* state, uint64_t segment, Plain plain) {
  __shared__ ReduceMailbox job;
  __shared__ int action;
  __shared__ uint64_t seen;
  volatile ReduceMailbox* mail = box;
  volatile ReduceMailbox* mirror = &state->mirror;
  if (threadIdx.x == 0) seen = mail->done;
  for (;;) {
    if (threadIdx.x == 0) {
      for (;;) {
        if (blockIdx.x == 0) {
          const uint64_t posted = mail->posted;
          if (posted > mirror->posted) {
            __threadfence_system();  // the job's fields are read after `posted`
            mirror->segment = mail->segment;
            mirror->count = mail->count;
            mirror->dst = mail->dst;
            mirror->mine = mail->mine;
            mirror->arrived = mail->arrived;
            mirror->last = mail->last;
            mirror->divisor = mail->divisor;
            __threadfence();  // the other blocks read the fields after `posted`
            mirror->posted = posted;
          }
          const uint64_t ended = mail->ended;
          if (ended > mirror->ended) mirror->ended = ended;
        }
        const uint64_t posted = mirror->posted;
        __threadfence();
        if (posted > seen) {
          if (mirror->segment != segment) {
            action = kExit;  // a later segment's job: its server runs it
          } else {
            job.count = mirror->count;
            job.dst = mirror->dst;
            job.mine = mirror->mine;
            job.arrived = mirror->arrived;
            job.last = mirror->last;
            job.divisor = mirror->divisor;
            seen = posted;
            action = kRun;
          }
          break;
        }
        if (mirror->ended >= segment) {
          action = kExit;
          break;
        }
        __nanosleep(kPollNanoseconds);
      }
    }
    __syncthreads();
    if (action == kExit) return;
    if constexpr (kAvg) {
      if (job.last) {
        run_job<T>(job, reduce::SumDivideOp<T>{job.divisor});
      } else {
        run_job<T>(job, plain);
      }
    } else {
      run_job<T>(job, plain);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // This block's results are visible to the host before it counts.
      __threadfence_system();
      if (atomicAdd(&state->acks, 1u) == gridDim.x - 1) {
        atomicExch(&state->acks, 0u);
        __threadfence_system();
        mail->done = seen;
      }
    }
    __syncthreads();  // `job` and `action` are rewritten only after every thread used them
  }
}

template <typename T, bool kAvg = false, typename Plain>
cudaError_t launch(ReduceMailbox* box, ReduceServerState* state, uint64_t segment, Plain plain,
                   cudaStream_t stream) {
  if (!box) {
    // Preloading: make the module of this instantiation loaded now (lazy
    // loading would load it at its first launch, mid-call).
    cudaFuncAttributes attributes;
    return cudaFuncGetAttributes(&attributes, reduce_server_kernel<T, Plain, kAvg>);
  }
  (void)cudaGetLastError();
  reduce_server_kernel<T, Plain, kAvg><<<kServerBlocks, kThreads, 0, stream>>>(box, state, segment, plain);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_for_op(ReduceMailbox* box, ReduceServerState* state, uint64_t segment, rrRedOp_t op,
                          cudaStream_t stream) {
  switch (op) {
    case rrSum: return launch<T>(box, state, segment, reduce::SumOp<T>{}, stream);
    case rrProd: return launch<T>(box, state, segment, reduce::ProdOp<T>{}, stream);
    case rrMax: return launch<T>(box, state, segment, reduce::MaxOp<T>{}, stream);
    case rrMin: return launch<T>(box, state, segment, reduce::MinOp<T>{}, stream);
    case rrAvg: return launch<T, true>(box, state, segment, reduce::SumOp<T>{}, stream);  // sums, then divides
    default: break;
  }
  // Bitwise ops: integer types only (enqueue_reduce_server refuses the others).
  if constexpr (reduce::kIsInteger<T>) {
    switch (op) {
      case rrBand: return launch<T>(box, state, segment, reduce::BandOp<T>{}, stream);
      case rrBor: return launch<T>(box, state, segment, reduce::BorOp<T>{}, stream);
      case rrBxor: return launch<T>(box, state, segment, reduce::BxorOp<T>{}, stream);
      default: break;
    }
  }
  return cudaErrorInvalidValue;
}

bool is_bitwise(int op) { return op == rrBand || op == rrBor || op == rrBxor; }

bool is_floating(int dtype) {
  return dtype == rrFloat16 || dtype == rrBfloat16 || dtype == rrFloat32 || dtype == rrFloat64;
}

}  // namespace

Status enqueue_reduce_server(ReduceMailbox* box, ReduceServerState* state, uint64_t segment, rrDataType_t dtype,
                             rrRedOp_t op, void* stream) {
  if (dtype < 0 || dtype >= rrNumTypes || op < 0 || op >= rrNumOps) {
    return InvalidArgument("reduction server: unknown dtype " + std::to_string(dtype) + " or op " +
                           std::to_string(op));
  }
  if (is_bitwise(op) && is_floating(dtype)) {
    return InvalidArgument("reduction server: bitwise op " + std::to_string(op) + " is not defined for floating dtype " +
                           std::to_string(dtype));
  }
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t error = cudaErrorInvalidValue;
  reduce::with_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    error = launch_for_op<T>(box, state, segment, op, s);
  });
  if (error == cudaSuccess) return Status::Ok();
  return CudaError("launch of the reduction server of segment " + std::to_string(segment) + ": " +
                   cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

Status preload_reduce_servers() {
  for (int t = 0; t < rrNumTypes; ++t) {
    for (int o = 0; o < rrNumOps; ++o) {
      if (is_bitwise(o) && is_floating(t)) continue;  // no such server
      cudaError_t error = cudaErrorInvalidValue;
      reduce::with_dtype(static_cast<rrDataType_t>(t), [&](auto tag) {
        using T = decltype(tag);
        error = launch_for_op<T>(nullptr, nullptr, 0, static_cast<rrRedOp_t>(o), nullptr);
      });
      if (error != cudaSuccess) {
        return CudaError(std::string("loading the reduction servers (cudaFuncGetAttributes): ") +
                         cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
      }
    }
  }
  return Status::Ok();
}

}  // namespace rr::kernels
