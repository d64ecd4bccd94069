#pragma once
// Ring shapes for the fuzzer (--random-shapes): each split communicator is
// made with an rrConfig_t whose chunk size and pipeline depth are drawn from
// the seed, so one run cuts its rings many ways (odd chunk sizes that divide
// nothing, one-column pipelines, deep ones) and a replay cuts them the same.
//
// chunk_bytes must be the same on every rank of a communicator (the chunk
// cut is part of the protocol): it comes from the shared draw. The depth may
// differ (every rank takes the largest any asks for), so some draws give each
// rank its own, from a draw of its world rank, to exercise that agreement.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace soak {

struct Shape {
  size_t chunk_bytes = 0;
  bool depth_per_rank = false;
  std::vector<int> depths;  // [world rank] the depth that rank asks for

  // What world rank `rank` passes to rrCommSplit.
  rrConfig_t config(int rank) const;
  // E.g. "chunk_bytes 300136, pipeline_depth 9 on every rank", or per rank
  // "..., pipeline_depth asked 3,12 by world ranks 0,2: 12".
  std::string describe(const std::vector<int>& members) const;
};

// The shape of communicator `comm` (a CommId) in its `generation`-th making
// (0 at the start; the churned one's remakes pass the splitting call's index).
Shape draw_shape(uint64_t seed, int comm, uint64_t generation, int world_size);

}  // namespace soak
