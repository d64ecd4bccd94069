#include "memcpy_reference.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

namespace rrbench {

double measure_memcpy_gbps() {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  // Filled (so every page is faulted in) before anything is timed.
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), kBytes);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kBytes) / seconds / 1e9);
    std::swap(a, b);
  }
  return best;
}

}  // namespace rrbench
