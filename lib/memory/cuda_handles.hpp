#pragma once
// RAII owners of CUDA handles (CUDA build only), the conversions of a
// cudaError_t or CUresult into a Status naming the call that failed, and the
// lookup of driver API functions.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "common/status.hpp"

namespace rr::memory {

inline Status cuda_status(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::Ok();
  return CudaError(what + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

inline Status driver_status(CUresult result, const std::string& what) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  return CudaError(what + ": CUresult " + std::to_string(static_cast<int>(result)));
}

// A driver API function by name, as of the CUDA 12.0 API, through the
// runtime (no link to libcuda, which machines without a GPU lack); false if
// the driver has none.
template <typename Function>
bool driver_entry(const char* symbol, Function* out) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(symbol, &function, 12000, cudaEnableDefault, &found);
  if (error != cudaSuccess) (void)cudaGetLastError();
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess || !function) return false;
  *out = reinterpret_cast<Function>(function);
  return true;
}

// A stream the engine owns. Non-blocking: it never waits for the legacy
// default stream, only for what the engine orders it after (events).
class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  Status create(const char* what) {
    return cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       std::string("cudaStreamCreateWithFlags (") + what + ")");
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent() {
    if (event_) cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // No timing (cheaper to record); `blocking`: a host wait sleeps instead of spinning.
  Status create(bool blocking, const char* what) {
    const unsigned flags = cudaEventDisableTiming | (blocking ? cudaEventBlockingSync : 0u);
    return cuda_status(cudaEventCreateWithFlags(&event_, flags), std::string("cudaEventCreateWithFlags (") + what + ")");
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Pinned host memory mapped into the device (cudaHostAllocMapped).
class MappedHostMemory {
 public:
  MappedHostMemory() = default;
  ~MappedHostMemory() {
    if (host_) cudaFreeHost(host_);
  }
  MappedHostMemory(const MappedHostMemory&) = delete;
  MappedHostMemory& operator=(const MappedHostMemory&) = delete;

  Status allocate(size_t bytes, const char* what) {
    RR_RETURN_IF_ERROR(cuda_status(cudaHostAlloc(&host_, bytes, cudaHostAllocMapped),
                                   std::string("cudaHostAlloc (") + what + ")"));
    return cuda_status(cudaHostGetDevicePointer(&device_, host_, 0),
                       std::string("cudaHostGetDevicePointer (") + what + ")");
  }
  void* host() const { return host_; }
  void* device() const { return device_; }
  // Gives the memory up without freeing it: for memory a kernel may still
  // read after its owner is gone (the stream-ordering flag).
  void leak() { host_ = device_ = nullptr; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

}  // namespace rr::memory
