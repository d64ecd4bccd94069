#include "test_kernels.hpp"

namespace rr::test {
namespace {

__global__ void slow_fill_kernel(float* dst, size_t count, float value, unsigned long long delay_ns) {
  // One thread waits, the others at the barrier, then all write.
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    unsigned long long start = 0, now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
      __nanosleep(10000);
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delay_ns);
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = value;
}

__global__ void read_kernel(float* dst, const float* src, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

cudaError_t launch_slow_fill(float* dst, size_t count, float value, int delay_ms, cudaStream_t stream) {
  (void)cudaGetLastError();  // this launch's error, not an earlier one (a query's "not ready")
  // One block: the delay must pass before any element is written.
  slow_fill_kernel<<<1, 256, 0, stream>>>(dst, count, value, static_cast<unsigned long long>(delay_ms) * 1000000ull);
  return cudaGetLastError();
}

cudaError_t launch_read(float* dst, const float* src, size_t count, cudaStream_t stream) {
  (void)cudaGetLastError();
  read_kernel<<<64, 256, 0, stream>>>(dst, src, count);
  return cudaGetLastError();
}

}  // namespace rr::test
