#include "algo/ring.hpp"

namespace rr::algo {

RingSchedule::RingSchedule(int nranks, int rank, size_t count, size_t chunk_elems, int shift,
                           RingPhases phases, const int* order)
    : nranks_(nranks),
      rank_(rank),
      order_(order),
      position_(ring_position(order, nranks, rank)),
      count_(count),
      shift_(shift),
      phases_(phases) {
  // The largest segment decides the column count, so no chunk of any
  // segment exceeds chunk_elems; smaller segments get chunks one shorter.
  const size_t largest_segment = (count + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
  columns_ = largest_segment == 0 ? 0 : (largest_segment + chunk_elems - 1) / chunk_elems;
  if (phases_ == RingPhases::kAllGather) send_base_ = segment(send_segment(first_step())).offset;
  if (phases_ == RingPhases::kReduceScatter) recv_base_ = segment(owned_segment()).offset;
}

}  // namespace rr::algo
