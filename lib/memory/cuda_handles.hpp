#pragma once
// RAII owners of CUDA handles (CUDA build only), and the one conversion of a
// cudaError_t into a Status, naming the call that failed.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "common/status.hpp"

namespace rr::memory {

inline Status cuda_status(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::Ok();
  return CudaError(what + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
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
