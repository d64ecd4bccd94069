#pragma once
// Waiting for memory another agent writes (a GPU, a thread that is not
// ours to signal us): poll, yielding the core at first (what is waited for
// is usually there within microseconds), then napping 20 us so that the
// threads that do the work keep their cores.

#include <sched.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/status.hpp"

namespace rr {

// Polls `done` until it holds: yields for the first `spins` rounds, then
// naps. Every 2 ms `check` (if any) is asked; its error ends the wait.
inline Status poll(const std::function<bool()>& done, int spins, const std::function<Status()>& check = {}) {
  using Clock = std::chrono::steady_clock;
  auto next_check = Clock::now();
  for (int round = 0; !done(); ++round) {
    if (check && Clock::now() >= next_check) {
      next_check = Clock::now() + std::chrono::milliseconds(2);
      RR_RETURN_IF_ERROR(check());
    }
    if (round < spins) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  return Status::Ok();
}

}  // namespace rr
