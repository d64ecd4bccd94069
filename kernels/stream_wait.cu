// The wait kernel of stream-ordered calls (stream_wait.hpp).

#include "kernels/stream_wait.hpp"

#include <cuda_runtime.h>

#include <string>

namespace rr::kernels {
namespace {

// Polling period: a result reaches the stream within about this much of the
// host's write, and the PCIe link sees one 8-byte read per period.
constexpr unsigned kPollNanoseconds = 1000;

__global__ void flag_wait_kernel(const volatile unsigned long long* flag, unsigned long long value) {
  while (*flag < value) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(kPollNanoseconds);  // Volta and later; before them, a plain spin
#endif
  }
  // Reads of the result by later work must not be ordered before the flag's.
  __threadfence_system();
}

}  // namespace

Status enqueue_flag_wait(const volatile uint64_t* flag, uint64_t value, void* stream) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the flag is 64 bits");
  (void)cudaGetLastError();  // report this launch, not an earlier error on the thread
  flag_wait_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const volatile unsigned long long*>(flag), static_cast<unsigned long long>(value));
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::Ok();
  return CudaError(std::string("launch of the stream-ordering wait kernel (sequence ") + std::to_string(value) +
                   "): " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

}  // namespace rr::kernels
