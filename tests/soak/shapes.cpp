#include "shapes.hpp"

#include <algorithm>

#include "plan.hpp"
#include "values.hpp"

namespace soak {

namespace {

constexpr size_t kMinChunk = size_t{4} << 10;
constexpr size_t kMaxChunk = size_t{1} << 20;
constexpr int kMaxDepth = 16;
// A third of the communicators have ranks asking for different depths.
constexpr double kDepthPerRankChance = 1.0 / 3;

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

Shape draw_shape(uint64_t seed, int comm, uint64_t generation, int world_size) {
  Rng shared(mix(seed ^ 0x5348415045ull) ^ mix(static_cast<uint64_t>(comm) * 1000003u + generation));
  Shape shape;
  // Multiples of 8 from 4 KiB to 1 MiB: whole elements of every dtype, and
  // rarely a power of two.
  shape.chunk_bytes = kMinChunk + 8 * shared.below((kMaxChunk - kMinChunk) / 8 + 1);
  const int depth = 1 + static_cast<int>(shared.below(kMaxDepth));
  shape.depth_per_rank = shared.chance(kDepthPerRankChance);
  const uint64_t per_rank_seed = shared.next();
  shape.depths.assign(static_cast<size_t>(world_size), depth);
  if (shape.depth_per_rank) {
    for (int r = 0; r < world_size; ++r) {
      Rng mine(per_rank_seed ^ mix(static_cast<uint64_t>(r)));
      shape.depths[static_cast<size_t>(r)] = 1 + static_cast<int>(mine.below(kMaxDepth));
    }
  }
  return shape;
}

rrConfig_t Shape::config(int rank) const {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.chunk_bytes = chunk_bytes;
  config.pipeline_depth = depths[static_cast<size_t>(rank)];
  return config;
}

std::string Shape::describe(const std::vector<int>& members) const {
  std::string s = "chunk_bytes " + std::to_string(chunk_bytes) + ", pipeline_depth ";
  if (!depth_per_rank) return s + std::to_string(depths[0]) + " on every rank";
  std::vector<int> asked;
  int largest = 0;
  for (int m : members) {
    asked.push_back(depths[static_cast<size_t>(m)]);
    largest = std::max(largest, asked.back());
  }
  return s + "asked " + join(asked) + " by world ranks " + join(members) + ": " + std::to_string(largest);
}

}  // namespace soak
