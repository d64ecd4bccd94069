#pragma once
// The copies of the staging pipeline (comm/staged_collectives.hpp) behind one
// small interface, so the pipeline is the same code with or without a GPU:
//
// - two lanes, device-to-host and host-to-device; each runs its copies one
//   after the other, in the order they were issued, while the caller goes on;
// - markers: record(lane, m) completes once everything issued on that lane
//   before it has; wait(m) blocks until it has, query(m) asks;
// - staging slots: host memory made once, pinned where the engine can, that
//   one side of every copy points into.
//
// Two engines: CudaCopyEngine (memory/cuda_copy_engine.hpp: copy streams,
// events, cudaHostRegister'd slots; CUDA build only) and HostCopyEngine
// (memory/host_copy_engine.hpp: "device" memory is plain memory and a thread
// per lane does the copies), which the tests run the pipeline on.

#include <cstddef>

#include "common/status.hpp"

namespace rr::memory {

enum class Lane { kToHost, kToDevice };

// `rows` rows of `width` bytes: row r is read at src + r * src_pitch and
// written at dst + r * dst_pitch (a contiguous copy is one row).
struct Copy {
  void* dst = nullptr;
  size_t dst_pitch = 0;
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t width = 0;
  size_t rows = 0;
};

inline Copy contiguous(void* dst, const void* src, size_t bytes) { return Copy{dst, bytes, src, bytes, bytes, 1}; }

class CopyEngine {
 public:
  // Markers per engine: the pipeline uses two per slot.
  static constexpr int kMarkers = 16;

  virtual ~CopyEngine() = default;

  // Makes `slots` staging slots of at least `slot_bytes` each, once: a pool
  // already that large is kept. Not while copies are in flight.
  virtual Status reserve_slots(size_t slot_bytes, size_t slots) = 0;
  virtual void* slot(size_t index) const = 0;
  virtual size_t slots() const = 0;

  // Issues `copy` on `lane`, after everything issued there before.
  virtual Status copy(Lane lane, const Copy& copy) = 0;
  // Marker `marker` (0 <= marker < kMarkers) completes once everything
  // issued on `lane` so far has; recording it again moves it forward.
  virtual Status record(Lane lane, int marker) = 0;
  // Blocks until `marker` completed (at once for one never recorded). A copy
  // that failed is reported here, naming the copy.
  virtual Status wait(int marker) = 0;
  // *done = whether `marker` completed, without blocking.
  virtual Status query(int marker, bool* done) = 0;
};

}  // namespace rr::memory
