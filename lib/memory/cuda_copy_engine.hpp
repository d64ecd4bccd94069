#pragma once
// The CopyEngine of the CUDA build: one non-blocking stream per lane (two
// copy engines of the GPU work at once), events as markers
// (cudaEventRecord / cudaStreamWaitEvent), the arrival and release counts in
// mapped pinned memory, written and waited for on the lanes by stream memory
// operations (cuStreamWriteValue64 / cuStreamWaitValue64, reached through
// cudaGetDriverEntryPointByVersion: no link to libcuda), which hold no
// multiprocessor while they wait (ranks sharing a GPU are time-sliced). A
// device without 64-bit stream memory operations, or RR_GPU_STREAM_MEMOPS=0,
// gets one-thread kernels instead (kernels/stream_wait.hpp);
// RR_GPU_STREAM_MEMOPS=1 requires the operations. A third stream runs the
// reduction servers (kernels/reduce_server.hpp) with their mailbox in mapped
// pinned memory. And staging slots that are the
// StagingPool's page-aligned, touched memory pinned with cudaHostRegister, so
// copies are DMA at the bus's rate and UCX sends from the same pages. Made on
// one device; every call must be made with that device current.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/reduce_server.hpp"
#include "memory/copy_engine.hpp"
#include "memory/cuda_handles.hpp"
#include "memory/staging_pool.hpp"

namespace rr::memory {

class CudaCopyEngine : public CopyEngine {
 public:
  CudaCopyEngine() = default;
  // finish(), if not called before.
  ~CudaCopyEngine() override;
  // Releases every wait on the lanes and waits for the lanes to finish,
  // unless abandon() was called; then unpins the slots. Call with the
  // engine's device current. Nothing may be issued after it.
  void finish();
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  // Makes the streams, events and counters on the current device.
  Status init();

  Status reserve_slots(size_t slot_bytes, size_t slots) override;
  void* slot(size_t index) const override { return pool_->slot(index); }
  size_t slots() const override { return pool_->slots(); }
  Status copy(Lane lane, const Copy& copy) override;
  Status record(Lane lane, int marker) override;
  Status after(Lane lane, int marker) override;
  Status signal(Lane lane, uint64_t count) override;
  Status wait_release(Lane lane, uint64_t count) override;
  Status serve_reductions(Lane lane, uint64_t count, rrDataType_t dtype, rrRedOp_t op) override;
  uint64_t arrived() const override;
  Status wait_arrived(uint64_t count, const std::function<bool()>& give_up) override;
  void release(uint64_t count) override;
  Status post_reduction(uint64_t count, const Reduction& reduction, int timeout_ms,
                        const std::function<bool()>& give_up) override;
  void end_reductions(uint64_t count) override;
  Status wait(int marker) override;

  cudaStream_t stream(Lane lane) const { return streams_[static_cast<int>(lane)].get(); }

  // Pinned host memory for UCX to register: the slots.
  void* pinned() const { return pool_->data(); }
  size_t pinned_bytes() const { return pool_->bytes(); }

  // A lane may wait forever (on a caller's stream whose earlier work never
  // ends): the destructor then leaves the slots and counters allocated and
  // pinned instead of waiting for the lanes.
  void abandon() { abandoned_ = true; }
  // Whether a reduction failed while posted (see poisoned_).
  bool poisoned() const { return poisoned_; }

 private:
  Status check_marker(int marker) const;
  Status run_reduction(kernels::ReduceMailbox* box, uint64_t count, const Reduction& reduction, int timeout_ms,
                       const std::function<bool()>& give_up);
  // Finds the stream memory operations, or says why the kernels are used.
  Status find_memops(int device);
  void unregister();
  uint64_t* counter(int index) const;         // 0: arrived, 1: released (the host's pointer)
  uint64_t* device_counter(int index) const;  // the same, the device's pointer

  std::unique_ptr<StagingPool> pool_ = std::make_unique<StagingPool>();
  bool registered_ = false;
  bool abandoned_ = false;
  bool finished_ = false;
  size_t max_pitch_ = 0;  // cudaMemcpy2DAsync's limit on this device
  // Any lane's failure, or ok (after cudaStreamQuery of each).
  Status lane_error();

  CudaStream streams_[3];  // [Lane]
  CudaEvent markers_[kMarkers];
  MappedHostMemory counters_;  // two uint64_t, a cache line apart
  MappedHostMemory mailbox_;   // kernels::ReduceMailbox
  kernels::ReduceServerState* server_state_ = nullptr;  // device memory
  // A reduction failed while posted: a server may still run it later, so the
  // mailbox, the slots and what it writes stay as they are (as abandon()).
  bool poisoned_ = false;
  uint64_t posted_ = 0;        // the last reduction posted
  // The driver's stream memory operations; null: the kernels.
  CUresult (*wait_value_)(CUstream, CUdeviceptr, cuuint64_t, unsigned int) = nullptr;
  CUresult (*write_value_)(CUstream, CUdeviceptr, cuuint64_t, unsigned int) = nullptr;
};

}  // namespace rr::memory
