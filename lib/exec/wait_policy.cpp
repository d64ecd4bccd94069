#include "exec/wait_policy.hpp"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace rr::exec {

namespace {
std::atomic<int> g_host_ranks{1};
}  // namespace

bool parse_wait_mode(const char* text, WaitMode* out) {
  if (std::strcmp(text, "auto") == 0) return *out = WaitMode::kAuto, true;
  if (std::strcmp(text, "sleep") == 0) return *out = WaitMode::kSleep, true;
  if (std::strcmp(text, "yield") == 0) return *out = WaitMode::kYield, true;
  if (std::strcmp(text, "spin") == 0) return *out = WaitMode::kSpin, true;
  return false;
}

const char* wait_mode_name(WaitMode mode) {
  switch (mode) {
    case WaitMode::kAuto: return "auto";
    case WaitMode::kSleep: return "sleep";
    case WaitMode::kYield: return "yield";
    case WaitMode::kSpin: return "spin";
  }
  return "?";
}

WaitMode wait_mode() {
  // A bad value is refused when a communicator is made (comm/settings.cpp);
  // here it keeps the default.
  static const WaitMode mode = [] {
    WaitMode m = WaitMode::kAuto;
    if (const char* v = std::getenv("RR_WAIT_POLICY")) (void)parse_wait_mode(v, &m);
    return m;
  }();
  return mode;
}

void note_host_ranks(int ranks) {
  int seen = g_host_ranks.load(std::memory_order_relaxed);
  while (ranks > seen && !g_host_ranks.compare_exchange_weak(seen, ranks, std::memory_order_relaxed)) {
  }
}

int host_ranks() { return g_host_ranks.load(std::memory_order_relaxed); }

int usable_cores() {
  static const int cores = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
    const int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
  }();
  return cores;
}

WaitMode effective_wait_mode() {
  const WaitMode mode = wait_mode();
  if (mode != WaitMode::kAuto) return mode;
  return host_ranks() > usable_cores() ? WaitMode::kYield : WaitMode::kSleep;
}

}  // namespace rr::exec
