#pragma once
// Carries out a schedule's primitive (algo/primitive.hpp) on one chunk, for
// every executor of the ring and the chain. An executor says where the
// chunk's bytes are; this says what happens to them. Where two of the
// places are one buffer (a chunk that arrived in its final place, a send
// that reads the output) the copy between them is skipped, so the UCX
// executors, which receive into the output and send from it, copy nothing,
// while the slot rings' executor, which reads from and writes into shared
// slots, copies exactly what moves.

#include <cstddef>
#include <cstdint>

#include "algo/primitive.hpp"
#include "algo/ring.hpp"
#include "common/status.hpp"
#include "exec/call.hpp"

namespace rr::exec {

// One chunk's places, each null where the primitive does not use it.
struct ChunkPlaces {
  const void* mine = nullptr;     // this rank's input for the chunk
  const void* arrived = nullptr;  // what the left neighbour sent
  void* keep = nullptr;           // the chunk's place in the output
  // What the right neighbour is sent: after the primitive it holds the
  // chunk to send on. It may be `keep` (the send reads the output), `mine`
  // (a send of the input) or `arrived` (a partial result reduced in place).
  void* forward = nullptr;
  size_t count = 0;  // elements
};

// Runs `p` for `call` (its dtype, op and reducer; a final reduction divides
// rrAvg by `nranks`) on `places`. Reductions go through call.reducer when it
// has one, else run on the host; copies are memcpy (host memory). Not ok
// only when the reducer fails.
Status run_primitive(algo::Primitive p, const Call& call, int nranks, const ChunkPlaces& places);

// Where the ring's chunks sit in a call's buffers (call.hpp lays them out by
// phase, algo::RingSchedule's send_offset / recv_offset place a chunk in them).
class RingBuffers {
 public:
  RingBuffers(const algo::RingSchedule& schedule, const Call& call);
  // This rank's input for `chunk`: the column's first send reads it.
  const uint8_t* input(const algo::Range& chunk) const { return send_ + schedule_->send_offset(chunk) * elem_; }
  // What reductions combine with: the input, or the reducer's source.
  const uint8_t* mine(const algo::Range& chunk) const { return mine_ + schedule_->send_offset(chunk) * elem_; }
  // The chunk's place in the output.
  uint8_t* output(const algo::Range& chunk) const { return recv_ + schedule_->recv_offset(chunk) * elem_; }
  size_t bytes(const algo::Range& chunk) const { return chunk.count * elem_; }

 private:
  const algo::RingSchedule* schedule_;
  const uint8_t* send_;
  const uint8_t* mine_;
  uint8_t* recv_;
  size_t elem_;
};

}  // namespace rr::exec
