#include "memory/host_copy_engine.hpp"

#include <cstring>
#include <string>

namespace rr::memory {

HostCopyEngine::HostCopyEngine(std::chrono::microseconds copy_delay) : copy_delay_(copy_delay) {
  for (Worker& worker : workers_) worker.thread = std::thread([this, &worker] { work(worker); });
}

HostCopyEngine::~HostCopyEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  for (Worker& worker : workers_) worker.thread.join();
}

Status HostCopyEngine::reserve_slots(size_t slot_bytes, size_t slots) { return pool_.reserve(slot_bytes, slots); }

Status HostCopyEngine::check_marker(int marker) const {
  if (marker < 0 || marker >= kMarkers) {
    return InternalError("copy engine: marker " + std::to_string(marker) + " out of range 0.." +
                         std::to_string(kMarkers - 1));
  }
  return Status::Ok();
}

Status HostCopyEngine::copy(Lane lane, const Copy& copy) {
  std::lock_guard<std::mutex> lock(mutex_);
  workers_[static_cast<int>(lane)].commands.push_back(Command{copy, -1, 0});
  changed_.notify_all();
  return Status::Ok();
}

Status HostCopyEngine::record(Lane lane, int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::lock_guard<std::mutex> lock(mutex_);
  workers_[static_cast<int>(lane)].commands.push_back(Command{Copy{}, marker, ++recorded_[marker]});
  changed_.notify_all();
  return Status::Ok();
}

Status HostCopyEngine::wait(int marker) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = recorded_[marker];
  changed_.wait(lock, [&] { return completed_[marker] >= target; });
  return Status::Ok();
}

Status HostCopyEngine::query(int marker, bool* done) {
  RR_RETURN_IF_ERROR(check_marker(marker));
  std::lock_guard<std::mutex> lock(mutex_);
  *done = completed_[marker] >= recorded_[marker];
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
    worker.commands.pop_front();
    if (command.marker >= 0) {
      completed_[command.marker] = command.generation;
      changed_.notify_all();
      continue;
    }
    lock.unlock();
    if (copy_delay_.count() > 0) std::this_thread::sleep_for(copy_delay_);
    const Copy& c = command.copy;
    for (size_t row = 0; row < c.rows; ++row) {
      std::memcpy(static_cast<uint8_t*>(c.dst) + row * c.dst_pitch,
                  static_cast<const uint8_t*>(c.src) + row * c.src_pitch, c.width);
    }
    lock.lock();
    ++copies_;
  }
}

}  // namespace rr::memory
