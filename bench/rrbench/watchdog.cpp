#include "watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace rrbench {

Watchdog::Watchdog(int rank, int timeout_s) : rank_(rank), timeout_(timeout_s) {
  if (timeout_s > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_one();
  thread_.join();
}

void Watchdog::arm(const std::string& what) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() + timeout_;
  }
  changed_.notify_one();
}

void Watchdog::disarm() {
  if (!thread_.joinable()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      std::fprintf(stderr, "rr-bench: rank %d: %s did not finish within -T %lld s\n", rank_, what_.c_str(),
                   static_cast<long long>(timeout_.count()));
      std::fflush(stderr);
      std::_Exit(124);
    }
  }
}

}  // namespace rrbench
