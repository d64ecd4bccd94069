#include "memory/cuda_copy_engine.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/env.hpp"
#include "common/log.hpp"
#include "common/poll.hpp"
#include "kernels/reduce_server.hpp"
#include "kernels/stream_wait.hpp"
#include "topo/numa.hpp"

namespace rr::memory {

namespace {
const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::kToHost: return "device-to-host";
    case Lane::kToDevice: return "host-to-device";
    case Lane::kReduce: return "reduction";
  }
  return "unknown";
}
constexpr size_t kCounterStride = 64;  // bytes: the host's and the device's writes never share a line

// *counter = max(*counter, value), as a release store.
void store_max(uint64_t* counter, uint64_t value) {
  uint64_t seen = __atomic_load_n(counter, __ATOMIC_RELAXED);
  while (seen < value &&
         !__atomic_compare_exchange_n(counter, &seen, value, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
}


}  // namespace

CudaCopyEngine::~CudaCopyEngine() { finish(); }

void CudaCopyEngine::finish() {
  if (!counters_.host() || finished_) return;  // init() never ran, or done already
  finished_ = true;
  // Every wait on the lanes passes (the last count handed out: the GPU's
  // comparison is cyclic, copy_engine.hpp); then nothing may still copy into
  // or out of the slots once they go.
  release(issued());
  end_reductions(issued());
  if (abandoned_ || poisoned_) {
    RR_LOG(LogLevel::kWarn, "staging: %s; its %zu bytes of slots stay allocated",
           poisoned_ ? "a failed reduction may still run on the GPU" : "a lane may wait forever on a stream's earlier work",
           pool_->bytes());
    (void)pool_.release();
    counters_.leak();
    mailbox_.leak();
    server_state_ = nullptr;
    return;
  }
  for (CudaStream& stream : streams_) {
    if (stream.get()) cudaStreamSynchronize(stream.get());
  }
  if (server_state_) cudaFree(server_state_);
  server_state_ = nullptr;
  unregister();
}

void CudaCopyEngine::unregister() {
  if (registered_) cudaHostUnregister(pool_->data());
  registered_ = false;
}

uint64_t* CudaCopyEngine::counter(int index) const {
  return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(counters_.host()) + index * kCounterStride);
}

uint64_t* CudaCopyEngine::device_counter(int index) const {
  return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(counters_.device()) + index * kCounterStride);
}

Status CudaCopyEngine::init() {
  RR_RETURN_IF_ERROR(streams_[static_cast<int>(Lane::kToHost)].create("staging, device-to-host"));
  RR_RETURN_IF_ERROR(streams_[static_cast<int>(Lane::kToDevice)].create("staging, host-to-device"));
  RR_RETURN_IF_ERROR(streams_[static_cast<int>(Lane::kReduce)].create("staging, reductions"));
  for (CudaEvent& marker : markers_) RR_RETURN_IF_ERROR(marker.create(/*blocking=*/true, "staging marker"));
  RR_RETURN_IF_ERROR(counters_.allocate(2 * kCounterStride, "the staging counters"));
  __atomic_store_n(counter(0), uint64_t{0}, __ATOMIC_RELEASE);
  __atomic_store_n(counter(1), uint64_t{0}, __ATOMIC_RELEASE);
  RR_RETURN_IF_ERROR(mailbox_.allocate(sizeof(kernels::ReduceMailbox), "the reduction mailbox"));
  std::memset(mailbox_.host(), 0, sizeof(kernels::ReduceMailbox));
  RR_RETURN_IF_ERROR(cuda_status(cudaMalloc(reinterpret_cast<void**>(&server_state_), sizeof(kernels::ReduceServerState)),
                                 "cudaMalloc (the reduction servers' state)"));
  // On the lane the servers run on, before any of them.
  RR_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(server_state_, 0, sizeof(kernels::ReduceServerState),
                                                 stream(Lane::kReduce)),
                                 "cudaMemsetAsync (the reduction servers' state)"));
  int device = 0;
  int max_pitch = 0;
  RR_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  RR_RETURN_IF_ERROR(cuda_status(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device),
                                 "cudaDeviceGetAttribute(cudaDevAttrMaxPitch)"));
  max_pitch_ = static_cast<size_t>(max_pitch);
  return find_memops(device);
}

Status CudaCopyEngine::find_memops(int device) {
  const char* setting = env_str("RR_GPU_STREAM_MEMOPS");
  const std::string mode = setting ? setting : "auto";
  if (mode != "auto" && mode != "0" && mode != "1") {
    return InvalidArgument("RR_GPU_STREAM_MEMOPS=" + mode + ": expected 0 (kernels), 1 (stream memory operations) or "
                           "unset (those where the device has them)");
  }
  std::string why;
  if (mode == "0") {
    why = "RR_GPU_STREAM_MEMOPS=0";
  } else {
    CUresult (*device_get)(CUdevice*, int) = nullptr;
    CUresult (*get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
    CUdevice handle = 0;
    int supported = 0;
    if (!driver_entry("cuDeviceGet", &device_get) || !driver_entry("cuDeviceGetAttribute", &get_attribute) ||
        !driver_entry("cuStreamWaitValue64", &wait_value_) || !driver_entry("cuStreamWriteValue64", &write_value_)) {
      why = "the driver has no stream memory operations";
    } else if (device_get(&handle, device) != CUDA_SUCCESS ||
               get_attribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, handle) != CUDA_SUCCESS ||
               supported == 0) {
      why = "GPU " + std::to_string(device) + " has no 64-bit stream memory operations";
    }
  }
  if (!why.empty()) {
    wait_value_ = nullptr;
    write_value_ = nullptr;
    if (mode == "1") return InvalidArgument("RR_GPU_STREAM_MEMOPS=1, but " + why);
  }
  RR_LOG(LogLevel::kInfo, "GPU %d: staging counters by %s%s%s", device,
         wait_value_ ? "stream memory operations" : "one-thread kernels", why.empty() ? "" : ": ", why.c_str());
  return wait_value_ ? Status::Ok() : kernels::preload_flag_kernels();
}

Status CudaCopyEngine::reserve_slots(size_t slot_bytes, size_t slots) {
  if (registered_ && pool_->slots() >= slots && pool_->slot_bytes() >= slot_bytes) return Status::Ok();
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
  RR_RETURN_IF_ERROR(pool_->reserve(slot_bytes, slots, node));
  RR_LOG(LogLevel::kInfo, "GPU %d (%s): staging slots %zu x %zu B on %s%s%s", device, busid, pool_->slots(),
         pool_->slot_bytes(), pool_->placement().c_str(), why.empty() ? "" : "; hwloc: ", why.c_str());
  // The pool's pages are touched already: pin them where they are.
  // Mapped: with RR_GPU_REDUCE=device, reduction kernels write into them.
  RR_RETURN_IF_ERROR(cuda_status(cudaHostRegister(pool_->data(), pool_->bytes(),
                                                  cudaHostRegisterMapped | cudaHostRegisterPortable),
                                 "cudaHostRegister of " + std::to_string(pool_->bytes()) + " bytes of staging slots"));
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
  cudaStream_t lane_stream = stream(lane);
  const bool strided = c.rows > 1 && c.dst_pitch <= max_pitch_ && c.src_pitch <= max_pitch_;
  cudaError_t error = cudaSuccess;
  if (strided) {
    error = cudaMemcpy2DAsync(c.dst, c.dst_pitch, c.src, c.src_pitch, c.width, c.rows, kind, lane_stream);
  } else {
    // One row, or rows further apart than a 2D copy may stride: a copy per
    // row (there are as many as ranks).
    for (size_t row = 0; row < c.rows && error == cudaSuccess; ++row) {
      error = cudaMemcpyAsync(static_cast<uint8_t*>(c.dst) + row * c.dst_pitch,
                              static_cast<const uint8_t*>(c.src) + row * c.src_pitch, c.width, kind, lane_stream);
    }
  }
  if (error == cudaSuccess) return Status::Ok();
  return cuda_status(error, std::string(strided ? "cudaMemcpy2DAsync" : "cudaMemcpyAsync") + " (" + lane_name(lane) +
                                ", " + std::to_string(c.rows) + " x " + std::to_string(c.width) + " bytes)");
}

Status CudaCopyEngine::record(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  return cuda_status(cudaEventRecord(markers_[marker].get(), stream(lane)),
                     std::string("cudaEventRecord on the ") + lane_name(lane) + " staging stream");
}

Status CudaCopyEngine::after(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  return cuda_status(cudaStreamWaitEvent(stream(lane), markers_[marker].get(), 0),
                     std::string("cudaStreamWaitEvent on the ") + lane_name(lane) + " staging stream");
}

Status CudaCopyEngine::signal(Lane lane, uint64_t count) {
  uint64_t* arrived = device_counter(0);
  if (write_value_) {
    // Default flags: a system-wide fence before the write.
    return driver_status(write_value_(stream(lane), reinterpret_cast<CUdeviceptr>(arrived), count,
                                      CU_STREAM_WRITE_VALUE_DEFAULT),
                         std::string("cuStreamWriteValue64 on the ") + lane_name(lane) + " staging stream");
  }
  return kernels::enqueue_flag_set(arrived, count, stream(lane));
}

Status CudaCopyEngine::wait_release(Lane lane, uint64_t count) {
  const uint64_t* released = device_counter(1);
  if (wait_value_) {
    return driver_status(wait_value_(stream(lane), reinterpret_cast<CUdeviceptr>(released), count,
                                     CU_STREAM_WAIT_VALUE_GEQ),
                         std::string("cuStreamWaitValue64 on the ") + lane_name(lane) + " staging stream");
  }
  return kernels::enqueue_flag_wait(released, count, stream(lane));
}

uint64_t CudaCopyEngine::arrived() const { return __atomic_load_n(counter(0), __ATOMIC_ACQUIRE); }

Status CudaCopyEngine::wait_arrived(uint64_t count, const std::function<bool()>& give_up) {
  // Usually the segment is there already (it was copied while the previous
  // one was on the network).
  return poll([&] { return arrived() >= count; }, 256, [&]() -> Status {
    RR_RETURN_IF_ERROR(lane_error());
    if (give_up && give_up()) return InvalidUsage("gave up waiting for staged segment " + std::to_string(count));
    return Status::Ok();
  });
}

Status CudaCopyEngine::lane_error() {
  for (Lane lane : {Lane::kToHost, Lane::kToDevice, Lane::kReduce}) {
    const cudaError_t state = cudaStreamQuery(stream(lane));
    if (state == cudaErrorNotReady) (void)cudaGetLastError();  // not an error: busy
    if (state != cudaSuccess && state != cudaErrorNotReady) {
      return cuda_status(state, std::string("the ") + lane_name(lane) + " staging stream");
    }
  }
  return Status::Ok();
}

Status CudaCopyEngine::serve_reductions(Lane lane, uint64_t count, rrDataType_t dtype, rrRedOp_t op) {
  if (poisoned_) return InvalidUsage("reduction server: an earlier reduction failed; no server runs again");
  return kernels::enqueue_reduce_server(static_cast<kernels::ReduceMailbox*>(mailbox_.device()), server_state_, count,
                                        dtype, op, stream(lane));
}

Status CudaCopyEngine::post_reduction(uint64_t count, const Reduction& r, int timeout_ms,
                                      const std::function<bool()>& give_up) {
  auto* box = static_cast<kernels::ReduceMailbox*>(mailbox_.host());
  if (poisoned_) return InvalidUsage("reduction server: an earlier reduction failed; no server runs again");
  Status status = run_reduction(box, count, r, timeout_ms, give_up);
  // The job stays in the mailbox: a server that starts late would still run
  // it. Nothing it may write is freed or reused from now on.
  if (!status.ok()) poisoned_ = true;
  return status;
}

Status CudaCopyEngine::run_reduction(kernels::ReduceMailbox* box, uint64_t count, const Reduction& r,
                                     int timeout_ms, const std::function<bool()>& give_up) {
  if (__atomic_load_n(&box->done, __ATOMIC_ACQUIRE) != posted_) {
    return InternalError("reduction server: a reduction is already posted");
  }
  // The job's fields, then its number (a release store: the server reads the
  // fields after it).
  box->segment = count;
  box->count = r.count;
  box->dst = r.dst;
  box->mine = r.mine;
  box->arrived = r.arrived;
  box->last = r.last ? 1 : 0;
  box->divisor = r.divisor;
  const uint64_t posted = ++posted_;
  __atomic_store_n(&box->posted, posted, __ATOMIC_RELEASE);
  // Usually done in microseconds; never forever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  return poll([&] { return __atomic_load_n(&box->done, __ATOMIC_ACQUIRE) >= posted; }, 1000, [&]() -> Status {
    RR_RETURN_IF_ERROR(lane_error());
    if (give_up && give_up()) {
      return InvalidUsage("gave up waiting for the reduction of " + std::to_string(r.count) + " elements");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Timeout("the reduction of " + std::to_string(r.count) + " elements (segment " + std::to_string(count) +
                     ") was not run within " + std::to_string(timeout_ms) + " ms by the GPU's reduction server");
    }
    return Status::Ok();
  });
}

void CudaCopyEngine::end_reductions(uint64_t count) {
  auto* box = static_cast<kernels::ReduceMailbox*>(mailbox_.host());
  if (box) store_max(&box->ended, count);
}

void CudaCopyEngine::release(uint64_t count) { store_max(counter(1), count); }

Status CudaCopyEngine::wait(int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  // A failed copy surfaces here, as the error of the event after it.
  return cuda_status(cudaEventSynchronize(markers_[marker].get()), "cudaEventSynchronize of a staging marker");
}

}  // namespace rr::memory
