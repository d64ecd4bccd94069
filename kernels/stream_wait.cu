// The counter kernels of the staging pipeline (stream_wait.hpp).

#include "kernels/stream_wait.hpp"

#include <cuda_runtime.h>

#include <string>

namespace rr::kernels {
namespace {

// Polling period: a release reaches the stream within about this much of the
// host's write, and the PCIe link sees one 8-byte read per period.
constexpr unsigned kPollNanoseconds = 1000;

__global__ void flag_wait_kernel(const volatile unsigned long long* flag, unsigned long long value) {
  while (*flag < value) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(kPollNanoseconds);  // Volta and later; before them, a plain spin
#endif
  }
  // Later work on the stream must not read the staged data before the flag.
  __threadfence_system();
}

__global__ void flag_set_kernel(volatile unsigned long long* flag, unsigned long long value) {
  // The stream's earlier copies completed before this kernel started; the
  // fence orders anything this grid wrote before the flag for the host.
  __threadfence_system();
  *flag = value;
}

Status launched(const char* what, uint64_t value) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return Status::Ok();
  return CudaError(std::string("launch of the staging ") + what + " kernel (count " + std::to_string(value) +
                   "): " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

}  // namespace

Status enqueue_flag_wait(const volatile uint64_t* flag, uint64_t value, void* stream) {
  static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "the flag is 64 bits");
  (void)cudaGetLastError();  // report this launch, not an earlier error on the thread
  flag_wait_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      reinterpret_cast<const volatile unsigned long long*>(flag), static_cast<unsigned long long>(value));
  return launched("wait", value);
}

Status enqueue_flag_set(volatile uint64_t* flag, uint64_t value, void* stream) {
  (void)cudaGetLastError();
  flag_set_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(reinterpret_cast<volatile unsigned long long*>(flag),
                                                                  static_cast<unsigned long long>(value));
  return launched("signal", value);
}

Status preload_flag_kernels() {
  cudaFuncAttributes attributes;
  for (const void* kernel : {reinterpret_cast<const void*>(&flag_wait_kernel),
                             reinterpret_cast<const void*>(&flag_set_kernel)}) {
    const cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) {
      return CudaError(std::string("loading the staging counter kernels (cudaFuncGetAttributes): ") +
                       cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
    }
  }
  return Status::Ok();
}

}  // namespace rr::kernels
