#pragma once
// A CopyEngine without a GPU: "device" memory is ordinary memory, and one
// thread per lane does the copies in issue order while the caller goes on,
// as a copy engine does. The staging pipeline's tests run on it, so a missed
// wait (reading a slot before its copy landed, or reusing a slot whose copy
// back is still running) shows up as wrong data; `copy_delay` holds every
// copy back that long to widen those windows.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "memory/copy_engine.hpp"
#include "memory/staging_pool.hpp"

namespace rr::memory {

class HostCopyEngine : public CopyEngine {
 public:
  explicit HostCopyEngine(std::chrono::microseconds copy_delay = std::chrono::microseconds(0));
  ~HostCopyEngine() override;
  HostCopyEngine(const HostCopyEngine&) = delete;
  HostCopyEngine& operator=(const HostCopyEngine&) = delete;

  Status reserve_slots(size_t slot_bytes, size_t slots) override;
  void* slot(size_t index) const override { return pool_.slot(index); }
  size_t slots() const override { return pool_.slots(); }
  Status copy(Lane lane, const Copy& copy) override;
  Status record(Lane lane, int marker) override;
  Status wait(int marker) override;
  Status query(int marker, bool* done) override;

  // Copies done so far, on both lanes.
  uint64_t copies() const;

 private:
  // A copy, or (marker >= 0) a marker reaching `generation`.
  struct Command {
    Copy copy;
    int marker = -1;
    uint64_t generation = 0;
  };
  struct Worker {
    std::deque<Command> commands;
    std::thread thread;
  };

  Status check_marker(int marker) const;
  void work(Worker& worker);

  const std::chrono::microseconds copy_delay_;
  StagingPool pool_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  uint64_t copies_ = 0;
  uint64_t recorded_[kMarkers] = {};   // generation each marker was last recorded at
  uint64_t completed_[kMarkers] = {};  // generation each marker reached
  Worker workers_[2];                  // [Lane]
};

}  // namespace rr::memory
