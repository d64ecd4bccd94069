#include "machine_rates.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "bandwidth.h"
#include "reduce/reduce.hpp"

namespace rrbench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCopyBytes = std::size_t{256} << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

double measure_memcpy_gbps() {
  // Filled (so every page is faulted in) before anything is timed.
  std::vector<char> a(kCopyBytes, 1), b(kCopyBytes, 2);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    std::memcpy(b.data(), a.data(), kCopyBytes);
    best = std::max(best, static_cast<double>(kCopyBytes) / seconds_since(start) / 1e9);
    std::swap(a, b);
  }
  return best;
}

rr::algo::MachineRates measure_rates_at_once(const std::function<void()>& barrier) {
  rr::algo::MachineRates rates;
  std::vector<char> a(kCopyBytes, 1), b(kCopyBytes, 2);
  for (int rep = 0; rep < 3; ++rep) {
    barrier();
    const auto start = Clock::now();
    std::memcpy(b.data(), a.data(), kCopyBytes);
    rates.copy_bytes_per_s = std::max(rates.copy_bytes_per_s, static_cast<double>(kCopyBytes) / seconds_since(start));
    std::swap(a, b);
  }
  // The engine's own float32 sum, two chunks into a third, all in the caches.
  constexpr std::size_t kChunk = 64 << 10, kCount = kChunk / sizeof(float);
  std::vector<float> x(kCount, 1.0f), y(kCount, 2.0f), z(kCount);
  for (int rep = 0; rep < 3; ++rep) {
    barrier();
    const auto start = Clock::now();
    for (std::size_t done = 0; done < kCopyBytes; done += kChunk) {
      rr::reduce::reduce(z.data(), x.data(), y.data(), kCount, rrFloat32, rrSum);
      std::swap(x, z);  // the result is the next round's operand: nothing is optimised away
    }
    rates.reduce_bytes_per_s = std::max(rates.reduce_bytes_per_s, static_cast<double>(kCopyBytes) / seconds_since(start));
  }
  return rates;
}

double allreduce_bound_busbw(std::size_t bytes, int nranks, const rr::algo::MachineRates& rates) {
  const rr::algo::MemoryTraffic ring = rr::algo::allreduce_traffic(rr::algo::Schedule::kSameHostRing, nranks);
  const double seconds = rr::algo::traffic_bound_seconds(ring, bytes, rates);
  if (seconds <= 0) return 0;  // one rank (no ring), or nothing measured
  return static_cast<double>(bytes) / seconds / 1e9 * bus_factor(CollKind::kAllReduce, nranks);
}

}  // namespace rrbench
