#include "algo/pipeline.hpp"

#include <algorithm>
#include <cmath>

namespace rr::algo {

PipelineChoice depth_for_link(double rtt_s, double rate_Bps, size_t chunk_bytes, int floor, int cap) {
  PipelineChoice choice;
  choice.depth = floor;
  if (!(rtt_s > 0) || !(rate_Bps > 0) || chunk_bytes == 0) return choice;
  const double columns = kPipelineMargin * rate_Bps * (rtt_s / 2) / static_cast<double>(chunk_bytes);
  // Past the cap (and far past any int) the answer is the cap.
  const double wanted = 1 + std::ceil(columns);
  if (wanted > cap) {
    choice.depth = std::max(floor, cap);
    choice.capped = true;
  } else {
    choice.depth = std::max(floor, static_cast<int>(wanted));
  }
  return choice;
}

size_t balanced_chunk_elems(size_t segment_elems, size_t chunk_elems, int depth) {
  if (chunk_elems == 0 || depth < 1) return chunk_elems;
  const size_t per_wave = static_cast<size_t>(depth);
  const size_t columns = (segment_elems + chunk_elems - 1) / chunk_elems;
  if (columns <= per_wave) return chunk_elems;
  const size_t waves = (columns + per_wave - 1) / per_wave;
  const size_t full = waves * per_wave;
  return (segment_elems + full - 1) / full;
}

}  // namespace rr::algo
