#include "exec/wait_policy.hpp"

#include <sched.h>

#include <atomic>
#include <cstring>
#include <string>

#include "common/env.hpp"

namespace rr::exec {

namespace {
std::atomic<int> g_host_ranks{1};
std::atomic<bool> g_oversubscribed{false};
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

Status read_wait_mode(WaitMode* out) {
  struct Read {
    WaitMode mode = WaitMode::kAuto;
    Status status;
  };
  static const Read read = [] {
    Read r;
    const char* v = env_str("RR_WAIT_POLICY");  // empty counts as unset, as every RR_* does
    if (v != nullptr && !parse_wait_mode(v, &r.mode)) {
      r.mode = WaitMode::kAuto;
      r.status = InvalidArgument(std::string("RR_WAIT_POLICY=") + v + ": expected auto, sleep, yield or spin");
    }
    return r;
  }();
  *out = read.mode;
  return read.status;
}

WaitMode wait_mode() {
  WaitMode mode = WaitMode::kAuto;
  (void)read_wait_mode(&mode);
  return mode;
}

void note_host_ranks(int ranks, int cpus) {
  int seen = g_host_ranks.load(std::memory_order_relaxed);
  while (ranks > seen && !g_host_ranks.compare_exchange_weak(seen, ranks, std::memory_order_relaxed)) {
  }
  if (ranks > (cpus > 0 ? cpus : usable_cores())) g_oversubscribed.store(true, std::memory_order_relaxed);
}

int host_ranks() { return g_host_ranks.load(std::memory_order_relaxed); }

bool host_oversubscribed() { return g_oversubscribed.load(std::memory_order_relaxed); }

void usable_cpu_mask(uint64_t (&mask)[kCpuMaskWords]) {
  static_assert(kCpuMaskWords * 64 == CPU_SETSIZE, "the mask holds a cpu_set_t");
  for (uint64_t& word : mask) word = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
  }
}

int usable_cores() {
  static const int cores = [] {
    uint64_t mask[kCpuMaskWords];
    usable_cpu_mask(mask);
    int n = 0;
    for (uint64_t word : mask) n += __builtin_popcountll(word);
    return n > 0 ? n : 1;
  }();
  return cores;
}

WaitMode effective_wait_mode() {
  const WaitMode mode = wait_mode();
  if (mode != WaitMode::kAuto) return mode;
  return host_oversubscribed() ? WaitMode::kYield : WaitMode::kSleep;
}

}  // namespace rr::exec
