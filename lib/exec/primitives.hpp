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
  // The copy into `keep` is written with non-temporal stores
  // (reduce/stream_copy.hpp): a large output nobody reads soon.
  bool stream_keep = false;
};

// What primitives read and wrote, in bytes, by place: `mine` and `keep` are
// the call's buffers, `arrived` and `forward` the places between ranks
// (slots, staging). A copy skipped because its places are one is not
// counted. The slot rings' executor keeps one: the memory-traffic model
// (algo/memory_traffic.hpp) is checked against it.
struct Traffic {
  uint64_t buffer_read = 0;
  uint64_t buffer_written = 0;
  uint64_t shared_read = 0;
  uint64_t shared_written = 0;
  uint64_t reduced = 0;  // results of reductions
};

// Runs `p` for `call` (its dtype, op and reducer; a final reduction divides
// rrAvg by `nranks`) on `places`, adding what it moved to `traffic` when
// given. A reduction writes where the chunk is sent on from, when it is
// sent on, and the kept copy is taken from there. Reductions go through
// call.reducer when it has one, else run on the host; copies are memcpy
// (host memory). Not ok only when the reducer fails.
Status run_primitive(algo::Primitive p, const Call& call, int nranks, const ChunkPlaces& places,
                     Traffic* traffic = nullptr);

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
