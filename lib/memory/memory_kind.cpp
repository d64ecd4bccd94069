#include "memory/memory_kind.hpp"

#include <string>

#if RR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>
#endif

namespace rr::memory {

const char* kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host memory";
    case MemoryKind::kRegisteredHost: return "pinned host memory";
    case MemoryKind::kDevice: return "device memory";
    case MemoryKind::kManaged: return "managed memory";
  }
  return "unknown memory";
}

#if RR_HAVE_CUDA

namespace {
// Whether this process can use a GPU at all, asked once: on a machine
// without one (or without the driver) every pointer is host memory, and no
// call pays for asking again.
bool have_gpu() {
  static const bool have = [] {
    int devices = 0;
    const bool ok = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    (void)cudaGetLastError();  // the answer, not a sticky error for the next call
    return ok;
  }();
  return have;
}
}  // namespace

Status classify(const void* ptr, const char* name, Placement* out) {
  Placement placement;
  if (ptr != nullptr && have_gpu()) {
    cudaPointerAttributes attributes{};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, ptr);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      // A process that cannot use CUDA (no device, no driver, or a child
      // forked after its parent started CUDA) has no device memory; an
      // unknown pointer is host memory (older drivers say so this way).
      const bool host = error == cudaErrorInvalidValue || error == cudaErrorNoDevice ||
                        error == cudaErrorInsufficientDriver || error == cudaErrorInitializationError;
      if (!host) {
        return CudaError(std::string(name) + ": cudaPointerGetAttributes: " + cudaGetErrorName(error) + ": " +
                         cudaGetErrorString(error));
      }
      attributes.type = cudaMemoryTypeUnregistered;
    }
    switch (attributes.type) {
      case cudaMemoryTypeDevice: placement.kind = MemoryKind::kDevice; break;
      case cudaMemoryTypeManaged: placement.kind = MemoryKind::kManaged; break;
      case cudaMemoryTypeHost: placement.kind = MemoryKind::kRegisteredHost; break;
      default: placement.kind = MemoryKind::kHost; break;
    }
    if (placement.on_device()) placement.device = attributes.device;
  }
  *out = placement;
  return Status::Ok();
}

#else

Status classify(const void*, const char*, Placement* out) {
  *out = Placement{};  // no CUDA in this build: no device memory either
  return Status::Ok();
}

#endif

}  // namespace rr::memory
