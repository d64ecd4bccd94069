#pragma once
// Kernels the GPU tests enqueue around a stream-ordered call (test_kernels.cu):
// a writer that first waits on the GPU for `delay_ms` (so the call is issued
// long before its input exists), and a reader that copies the result out.

#include <cuda_runtime_api.h>

#include <cstddef>

namespace rr::test {

// dst[i] = value for i < count, after spinning about `delay_ms` on the GPU.
cudaError_t launch_slow_fill(float* dst, size_t count, float value, int delay_ms, cudaStream_t stream);
// dst[i] = src[i] for i < count, by a kernel (not a copy engine).
cudaError_t launch_read(float* dst, const float* src, size_t count, cudaStream_t stream);

}  // namespace rr::test
