#pragma once
// The CopyEngine of the CUDA build: one non-blocking stream per lane (two
// copy engines of the GPU work at once), events as markers, and staging
// slots that are the StagingPool's page-aligned, touched memory pinned with
// cudaHostRegister, so copies are DMA at the bus's rate and UCX sends from
// the same pages. Made on one device; every call must be made with that
// device current (the stream-ordered operation sets it).

#include "memory/copy_engine.hpp"
#include "memory/cuda_handles.hpp"
#include "memory/staging_pool.hpp"

namespace rr::memory {

class CudaCopyEngine : public CopyEngine {
 public:
  CudaCopyEngine() = default;
  ~CudaCopyEngine() override;
  CudaCopyEngine(const CudaCopyEngine&) = delete;
  CudaCopyEngine& operator=(const CudaCopyEngine&) = delete;

  // Makes the streams and events on the current device.
  Status init();

  Status reserve_slots(size_t slot_bytes, size_t slots) override;
  void* slot(size_t index) const override { return pool_.slot(index); }
  size_t slots() const override { return pool_.slots(); }
  Status copy(Lane lane, const Copy& copy) override;
  Status record(Lane lane, int marker) override;
  Status wait(int marker) override;
  Status query(int marker, bool* done) override;

  // Pinned host memory for UCX to register: the slots.
  void* pinned() const { return pool_.data(); }
  size_t pinned_bytes() const { return pool_.bytes(); }

 private:
  Status check_marker(int marker) const;
  void unregister();

  StagingPool pool_;
  bool registered_ = false;
  size_t max_pitch_ = 0;  // cudaMemcpy2DAsync's limit on this device
  CudaStream streams_[2];  // [Lane]
  CudaEvent markers_[kMarkers];
};

}  // namespace rr::memory
