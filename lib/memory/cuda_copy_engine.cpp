#include "memory/cuda_copy_engine.hpp"

#include <cstdint>
#include <string>

#include "common/log.hpp"
#include "topo/numa.hpp"

namespace rr::memory {

namespace {
const char* lane_name(Lane lane) { return lane == Lane::kToHost ? "device-to-host" : "host-to-device"; }
}  // namespace

CudaCopyEngine::~CudaCopyEngine() {
  // Nothing may still copy into or out of the slots once they go.
  for (CudaStream& stream : streams_) {
    if (stream.get()) cudaStreamSynchronize(stream.get());
  }
  unregister();
}

void CudaCopyEngine::unregister() {
  if (registered_) cudaHostUnregister(pool_.data());
  registered_ = false;
}

Status CudaCopyEngine::init() {
  RR_RETURN_IF_ERROR(streams_[static_cast<int>(Lane::kToHost)].create("staging, device-to-host"));
  RR_RETURN_IF_ERROR(streams_[static_cast<int>(Lane::kToDevice)].create("staging, host-to-device"));
  // The pipeline waits for a marker while the next segment is on the
  // network: spinning would take a core from the ring.
  for (CudaEvent& marker : markers_) RR_RETURN_IF_ERROR(marker.create(/*blocking=*/true, "staging marker"));
  int device = 0;
  int max_pitch = 0;
  RR_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  RR_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device),
                                 "cudaDeviceGetAttribute(cudaDevAttrMaxPitch)"));
  max_pitch_ = static_cast<size_t>(max_pitch);
  return Status::Ok();
}

Status CudaCopyEngine::reserve_slots(size_t slot_bytes, size_t slots) {
  if (registered_ && pool_.slots() >= slots && pool_.slot_bytes() >= slot_bytes) return Status::Ok();
  unregister();
  // The slots go on the NUMA node nearest the GPU where hwloc can say which:
  // every copy to and from the device crosses that node's memory.
  int device = 0;
  RR_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  char busid[32] = {};
  int node = -1;
  std::string why;
  if (cudaDeviceGetPCIBusId(busid, sizeof busid, device) == cudaSuccess) {
    node = topo::numa_node_of_pci(busid, &why);
  } else {
    (void)cudaGetLastError();
    why = "cudaDeviceGetPCIBusId failed";
  }
  RR_RETURN_IF_ERROR(pool_.reserve(slot_bytes, slots, node));
  RR_LOG(LogLevel::kInfo, "GPU %d (%s): staging slots %zu x %zu B on %s%s%s", device, busid, pool_.slots(),
         pool_.slot_bytes(), pool_.placement().c_str(), why.empty() ? "" : "; hwloc: ", why.c_str());
  // The pool's pages are touched already: pin them where they are.
  RR_RETURN_IF_ERROR(cuda_status(cudaHostRegister(pool_.data(), pool_.bytes(), cudaHostRegisterDefault),
                                 "cudaHostRegister of " + std::to_string(pool_.bytes()) + " bytes of staging slots"));
  registered_ = true;
  return Status::Ok();
}

Status CudaCopyEngine::check_marker(int marker) const {
  if (marker < 0 || marker >= kMarkers) {
    return InternalError("copy engine: marker " + std::to_string(marker) + " out of range 0.." +
                         std::to_string(kMarkers - 1));
  }
  return Status::Ok();
}

Status CudaCopyEngine::copy(Lane lane, const Copy& c) {
  // Default: the runtime reads the direction from the pointers (managed memory too).
  const cudaMemcpyKind kind = cudaMemcpyDefault;
  cudaStream_t stream = streams_[static_cast<int>(lane)].get();
  const bool strided = c.rows > 1 && c.dst_pitch <= max_pitch_ && c.src_pitch <= max_pitch_;
  cudaError_t error = cudaSuccess;
  if (strided) {
    error = cudaMemcpy2DAsync(c.dst, c.dst_pitch, c.src, c.src_pitch, c.width, c.rows, kind, stream);
  } else {
    // One row, or rows further apart than a 2D copy may stride: a copy per
    // row (there are as many as ranks).
    for (size_t row = 0; row < c.rows && error == cudaSuccess; ++row) {
      error = cudaMemcpyAsync(static_cast<uint8_t*>(c.dst) + row * c.dst_pitch,
                              static_cast<const uint8_t*>(c.src) + row * c.src_pitch, c.width, kind, stream);
    }
  }
  if (error == cudaSuccess) return Status::Ok();
  return cuda_status(error, std::string(strided ? "cudaMemcpy2DAsync" : "cudaMemcpyAsync") + " (" + lane_name(lane) +
                                ", " + std::to_string(c.rows) + " x " + std::to_string(c.width) + " bytes)");
}

Status CudaCopyEngine::record(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  return cuda_status(cudaEventRecord(markers_[marker].get(), streams_[static_cast<int>(lane)].get()),
                     std::string("cudaEventRecord on the ") + lane_name(lane) + " staging stream");
}

Status CudaCopyEngine::wait(int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  // A failed copy surfaces here, as the error of the event after it.
  return cuda_status(cudaEventSynchronize(markers_[marker].get()), "cudaEventSynchronize of a staging copy");
}

Status CudaCopyEngine::query(int marker, bool* done) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  const cudaError_t error = cudaEventQuery(markers_[marker].get());
  if (error == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: not yet
    *done = false;
    return Status::Ok();
  }
  RR_RETURN_IF_ERROR(cuda_status(error, "cudaEventQuery of a staging copy"));
  *done = true;
  return Status::Ok();
}

}  // namespace rr::memory
