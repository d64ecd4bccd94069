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

}  // namespace rr::algo
