#pragma once
// A CopyEngine without a GPU: "device" memory is ordinary memory, and one
// thread per lane does the lane's work in issue order while the caller goes
// on, as a copy engine does. The staging pipeline's tests run on it, so a
// missed dependency (reading a slot before its copy landed, reusing a slot
// whose copy back is still running) shows up as wrong data; `copy_delay`
// holds every copy back that long to widen those windows.
//
// `one_queue`: all lanes are one thread, in issue order across them, as
// CUDA streams that share a hardware queue. A pipeline that issued a
// wait before what releases it hangs there (copy_engine.hpp).
//
// `capacity` (0: unbounded): a lane holds at most this many operations not
// yet done, and issuing one more blocks until one is, as a CUDA launch
// queue that is full blocks the launching thread. A pipeline whose host
// half cannot run while its device half is being issued hangs there.

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
  explicit HostCopyEngine(std::chrono::microseconds copy_delay = std::chrono::microseconds(0),
                          bool one_queue = false, size_t capacity = 0);
  ~HostCopyEngine() override;
  HostCopyEngine(const HostCopyEngine&) = delete;
  HostCopyEngine& operator=(const HostCopyEngine&) = delete;

  Status reserve_slots(size_t slot_bytes, size_t slots) override;
  void* slot(size_t index) const override { return pool_.slot(index); }
  size_t slots() const override { return pool_.slots(); }
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

  // Copies done so far, on every lane; reductions the servers ran.
  uint64_t copies() const;
  uint64_t reductions() const;

 private:
  struct Command {
    enum Kind { kCopy, kRecord, kAfter, kSignal, kWaitRelease, kServe } kind = kCopy;
    Copy copy;
    int marker = 0;
    uint64_t value = 0;  // the marker's generation, or the count
    rrDataType_t dtype = rrFloat32;  // kServe
    rrRedOp_t op = rrSum;
  };
  struct Worker {
    std::deque<Command> commands;
    std::thread thread;
  };

  Status check_marker(int marker) const;
  Worker& lane_worker(Lane lane) { return workers_[one_queue_ ? 0 : static_cast<int>(lane)]; }
  // Blocks while `lane` is full (capacity); then `lock` is held, as before.
  void wait_for_room(Lane lane, std::unique_lock<std::mutex>& lock);
  Status push(Lane lane, const Command& command);
  void work(Worker& worker);
  // A reduction server's loop, as kernels/reduce_server.cu's; `lock` held.
  void serve(const Command& command, std::unique_lock<std::mutex>& lock);

  const std::chrono::microseconds copy_delay_;
  const bool one_queue_;
  const size_t capacity_;
  StagingPool pool_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  uint64_t copies_ = 0;
  uint64_t arrived_ = 0;
  uint64_t released_ = 0;
  uint64_t recorded_[kMarkers] = {};   // generation each marker was last recorded at
  uint64_t completed_[kMarkers] = {};  // generation each marker reached
  // The reduction mailbox (kernels/reduce_server.hpp).
  uint64_t posted_ = 0;
  uint64_t done_ = 0;
  uint64_t ended_ = 0;
  uint64_t job_segment_ = 0;
  Reduction job_;
  uint64_t reductions_ = 0;
  Worker workers_[3];  // [Lane]; with one_queue, workers_[0] only
};

}  // namespace rr::memory
