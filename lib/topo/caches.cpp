#include "topo/caches.hpp"

#include <sched.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>

#include "common/env.hpp"

namespace rr::topo {

namespace {

std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

}  // namespace

size_t parse_cache_size(const std::string& text) {
  uint64_t bytes = 0;
  return parse_size(text.c_str(), &bytes) ? static_cast<size_t>(bytes) : 0;
}

size_t last_level_cache_bytes_in(const std::string& cpu_cache_dir) {
  int best_level = 0;
  size_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cpu_cache_dir + "/index" + std::to_string(index);
    const std::string level = read_word(dir + "/level");
    if (level.empty()) break;  // the indices are dense
    const std::string type = read_word(dir + "/type");
    if (type != "Data" && type != "Unified") continue;
    const int l = std::atoi(level.c_str());
    const size_t bytes = parse_cache_size(read_word(dir + "/size"));
    if (l > best_level && bytes > 0) {
      best_level = l;
      best = bytes;
    }
  }
  return best;
}

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    const int cpu = sched_getcpu();
    return last_level_cache_bytes_in("/sys/devices/system/cpu/cpu" + std::to_string(cpu < 0 ? 0 : cpu) + "/cache");
  }();
  return bytes;
}

}  // namespace rr::topo
