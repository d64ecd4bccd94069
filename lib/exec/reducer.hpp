#pragma once
// Who reduces a ring's received chunks. Without one (Call::reducer
// null) the ring reduces on the host (reduce::reduce, reduce::reduce_last)
// with this rank's values read from the send buffer. With one, the reducer
// does, with this rank's values read from Call::reduce_source: the
// staging path passes the device copy of a segment and a reducer that posts
// to the segment's reduction server, so a received chunk is reduced by a
// kernel that reads it from pinned host memory in the same pass
// (comm/staged_collectives.hpp, RR_GPU_REDUCE=device).

#include <cstddef>

#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::exec {

class Reducer {
 public:
  virtual ~Reducer() = default;
  // dst = mine op arrived for `count` elements; with `last`, rrAvg also
  // divides by `nranks` (as reduce::reduce_last). dst is host memory the
  // ring sends from next, arrived a staging slot; dst may be arrived. Returns
  // once dst holds the result.
  virtual Status reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype,
                        rrRedOp_t op, bool last, int nranks) = 0;
};

}  // namespace rr::exec
