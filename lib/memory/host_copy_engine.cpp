#include "memory/host_copy_engine.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "reduce/reduce.hpp"

namespace rr::memory {

HostCopyEngine::HostCopyEngine(std::chrono::microseconds copy_delay, bool one_queue, size_t capacity)
    : copy_delay_(copy_delay), one_queue_(one_queue), capacity_(capacity) {
  for (int w = 0; w < (one_queue_ ? 1 : 3); ++w) {
    Worker& worker = workers_[w];
    worker.thread = std::thread([this, &worker] { work(worker); });
  }
}

HostCopyEngine::~HostCopyEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  for (Worker& worker : workers_) {
    if (worker.thread.joinable()) worker.thread.join();
  }
}

Status HostCopyEngine::reserve_slots(size_t slot_bytes, size_t slots) { return pool_.reserve(slot_bytes, slots); }

Status HostCopyEngine::check_marker(int marker) const {
  if (marker < 0 || marker >= kMarkers) {
    return InternalError("copy engine: marker " + std::to_string(marker) + " out of range 0.." +
                         std::to_string(kMarkers - 1));
  }
  return Status::Ok();
}

void HostCopyEngine::wait_for_room(Lane lane, std::unique_lock<std::mutex>& lock) {
  if (capacity_ == 0) return;
  Worker& w = lane_worker(lane);
  changed_.wait(lock, [&] { return stopping_ || w.commands.size() < capacity_; });
}

Status HostCopyEngine::push(Lane lane, const Command& command) {
  lane_worker(lane).commands.push_back(command);
  changed_.notify_all();
  return Status::Ok();
}

Status HostCopyEngine::copy(Lane lane, const Copy& copy) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  Command command;
  command.copy = copy;
  return push(lane, command);
}

Status HostCopyEngine::record(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  return push(lane, Command{Command::kRecord, Copy{}, marker, ++recorded_[marker]});
}

Status HostCopyEngine::after(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  // The generation recorded so far, as cudaStreamWaitEvent takes the event's last record.
  return push(lane, Command{Command::kAfter, Copy{}, marker, recorded_[marker]});
}

Status HostCopyEngine::signal(Lane lane, uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  return push(lane, Command{Command::kSignal, Copy{}, 0, count});
}

Status HostCopyEngine::wait_release(Lane lane, uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  return push(lane, Command{Command::kWaitRelease, Copy{}, 0, count});
}

Status HostCopyEngine::serve_reductions(Lane lane, uint64_t count, rrDataType_t dtype, rrRedOp_t op) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_room(lane, lock);
  Command command{Command::kServe, Copy{}, 0, count};
  command.dtype = dtype;
  command.op = op;
  return push(lane, command);
}

Status HostCopyEngine::post_reduction(uint64_t count, const Reduction& reduction, int timeout_ms,
                                      const std::function<bool()>& give_up) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_ != posted_) return InternalError("reduction server: a reduction is already posted");
  job_ = reduction;
  job_segment_ = count;
  const uint64_t posted = ++posted_;
  changed_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (done_ < posted) {
    if (give_up && give_up()) {
      return InvalidUsage("gave up waiting for the reduction of " + std::to_string(reduction.count) + " elements");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Timeout("the reduction of " + std::to_string(reduction.count) + " elements (segment " +
                     std::to_string(count) + ") was not run within " + std::to_string(timeout_ms) + " ms");
    }
    changed_.wait_for(lock, std::chrono::milliseconds(5));
  }
  return Status::Ok();
}

void HostCopyEngine::end_reductions(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  ended_ = std::max(ended_, count);
  changed_.notify_all();
}

uint64_t HostCopyEngine::reductions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reductions_;
}

void HostCopyEngine::serve(const Command& command, std::unique_lock<std::mutex>& lock) {
  const uint64_t segment = command.value;
  uint64_t seen = done_;
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || posted_ > seen || reached(ended_, segment); });
    if (stopping_ || posted_ <= seen) return;    // stopping, or the segment ended
    if (job_segment_ != segment) return;         // a later segment's: its server runs it
    seen = posted_;
    const Reduction job = job_;
    lock.unlock();
    if (job.last) {
      reduce::reduce_last(job.dst, job.mine, job.arrived, job.count, command.dtype, command.op, job.divisor);
    } else {
      reduce::reduce(job.dst, job.mine, job.arrived, job.count, command.dtype, command.op);
    }
    lock.lock();
    ++reductions_;
    done_ = seen;
    changed_.notify_all();
  }
}

uint64_t HostCopyEngine::arrived() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return arrived_;
}

Status HostCopyEngine::wait_arrived(uint64_t count, const std::function<bool()>& give_up) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (arrived_ < count) {
    if (give_up && give_up()) return InvalidUsage("gave up waiting for staged segment " + std::to_string(count));
    changed_.wait_for(lock, std::chrono::milliseconds(5));
  }
  return Status::Ok();
}

void HostCopyEngine::release(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  released_ = std::max(released_, count);
  changed_.notify_all();
}

Status HostCopyEngine::wait(int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = recorded_[marker];
  changed_.wait(lock, [&] { return completed_[marker] >= target; });
  return Status::Ok();
}

uint64_t HostCopyEngine::copies() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return copies_;
}

void HostCopyEngine::work(Worker& worker) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !worker.commands.empty(); });
    if (worker.commands.empty()) return;  // stopping, and nothing left
    const Command command = worker.commands.front();
    switch (command.kind) {
      case Command::kRecord:
        completed_[command.marker] = std::max(completed_[command.marker], command.value);
        break;
      case Command::kSignal:
        arrived_ = std::max(arrived_, command.value);
        break;
      case Command::kAfter:
      case Command::kWaitRelease: {
        // Held at the head of the lane, as a waiting stream holds its queue.
        auto ready = [&] {
          return command.kind == Command::kAfter ? completed_[command.marker] >= command.value
                                                 : reached(released_, command.value);
        };
        changed_.wait(lock, [&] { return ready() || stopping_; });
        if (!ready()) return;  // stopping with work that can never run
        break;
      }
      case Command::kServe:
        serve(command, lock);
        if (stopping_) return;
        break;
      case Command::kCopy: {
        lock.unlock();
        if (copy_delay_.count() > 0) std::this_thread::sleep_for(copy_delay_);
        const Copy& c = command.copy;
        for (size_t row = 0; row < c.rows; ++row) {
          std::memcpy(static_cast<uint8_t*>(c.dst) + row * c.dst_pitch,
                      static_cast<const uint8_t*>(c.src) + row * c.src_pitch, c.width);
        }
        lock.lock();
        ++copies_;
        break;
      }
    }
    worker.commands.pop_front();
    changed_.notify_all();
  }
}

}  // namespace rr::memory
