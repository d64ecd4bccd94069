#pragma once
// The fault tests' world: ranks as forked children of the test process (the
// parent only watches), each reporting the outcome of the call under test
// through a pipe, and a fixture that fails a test which leaves a
// shared-memory segment behind.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace fault_world {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What a rank reports to the parent through its pipe.
struct Outcome {
  int result = -1;        // rrResult_t of the call under test
  double seconds = 0;     // how long that call took
  int async_error = -1;   // rrCommGetAsyncError afterwards
  char error[1536] = {};  // rrGetLastError
};

using Body = std::function<void(int rank, rrComm_t comm, Outcome* out)>;

// Runs `body` on `n` forked ranks (those in `silent` may never report; they
// are killed at the end). Returns each rank's Outcome; a rank that did not
// report has result -1. Every child is reaped before it returns.
std::vector<Outcome> run_world(int n, int timeout_ms, const std::set<int>& silent, const Body& body);

void print(const std::vector<Outcome>& outcomes, const std::set<int>& skip = {});
inline bool has(const Outcome& o, const std::string& text) {
  return std::string(o.error).find(text) != std::string::npos;
}

std::set<std::string> shm_segments();

// Shared-memory segments a test created and did not remove: none may be
// left, by any rank, SIGKILLed ones included (the survivors remove a
// segment a killed rank left, lib/transport/ucx/shm_sweep.hpp).
class NoShmLeft : public ::testing::Test {
 protected:
  void SetUp() override { before_ = shm_segments(); }
  void TearDown() override {
    for (const std::string& name : shm_segments()) {
      if (!before_.count(name)) ADD_FAILURE() << "shared-memory segment left behind: /dev/shm/" << name;
    }
  }
  std::set<std::string> before_;
  int sysv_orphan_ = -1;
};

}  // namespace fault_world
