// -T: a rank whose current step runs past the timeout says which step and
// exits 124, so a hung peer library fails the run instead of hanging it (the
// launcher then takes the other ranks down).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace rrbench {

class Watchdog {
 public:
  // timeout_s == 0: never fires.
  Watchdog(int rank, int timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts the clock on `what` ("allreduce 64M float sum gloo-ring in-place").
  void arm(const std::string& what);
  void disarm();

 private:
  void watch();

  const int rank_;
  const std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  std::string what_;
  std::thread thread_;
};

}  // namespace rrbench
