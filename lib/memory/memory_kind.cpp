#include "memory/memory_kind.hpp"

#include <string>

#if RR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>

#include "memory/cuda_handles.hpp"
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

// Whether this process has a CUDA context that memory could belong to: a
// primary context active on some device (the runtime's, made by cudaMalloc
// and friends), or a context current on this thread (the driver API's).
// Until one exists no pointer is device memory, and asking the runtime
// (cudaPointerGetAttributes) would make one on device 0 in a process that
// never uses the GPU (hundreds of MiB of its memory, and time). Once true,
// it stays true. Where the driver cannot be asked, true (ask the runtime).
bool have_context() {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return true;
  struct Driver {
    CUresult (*device_get)(CUdevice*, int) = nullptr;
    CUresult (*primary_state)(CUdevice, unsigned int*, int*) = nullptr;
    CUresult (*current)(CUcontext*) = nullptr;
    int devices = 0;
    bool found = false;
  };
  static const Driver driver = [] {
    Driver d;
    d.found = driver_entry("cuDeviceGet", &d.device_get) &&
              driver_entry("cuDevicePrimaryCtxGetState", &d.primary_state) &&
              driver_entry("cuCtxGetCurrent", &d.current) && cudaGetDeviceCount(&d.devices) == cudaSuccess;
    (void)cudaGetLastError();
    return d;
  }();
  bool active = !driver.found;
  CUcontext current = nullptr;
  if (!active && driver.current(&current) == CUDA_SUCCESS && current != nullptr) active = true;
  for (int ordinal = 0; ordinal < driver.devices && !active; ++ordinal) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int state = 0;
    active = driver.device_get(&device, ordinal) == CUDA_SUCCESS &&
             driver.primary_state(device, &flags, &state) == CUDA_SUCCESS && state != 0;
  }
  if (active) seen.store(true, std::memory_order_relaxed);
  return active;
}
}  // namespace

Status classify(const void* ptr, const char* name, Placement* out) {
  Placement placement;
  if (ptr != nullptr && have_gpu() && have_context()) {
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
