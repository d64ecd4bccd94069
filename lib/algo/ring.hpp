#pragma once
// The ring allreduce as pure arithmetic: which segment and chunk each rank
// sends and receives at each step. No transport, no memory type.
//
// Allreduce of `count` elements on N ranks = reduce-scatter + all-gather,
// fused per chunk column:
//   the buffer is split into N segments, each segment into `columns()` chunks;
//   at step s (0 <= s < 2(N-1)) rank r sends segment (r - s) mod N to r + 1 and
//   receives segment (r - s - 1) mod N from r - 1;
//   steps 0..N-2 reduce what they receive (reduce-scatter); after them rank r
//   owns the fully reduced segment (r + 1) mod N; steps N-1..2N-3 overwrite
//   with what they receive (all-gather).
// Chunk c of every step forms column c; columns are independent, which is
// what lets several be in flight at once.

#include <cstddef>
#include <cstdint>

#include "algo/primitive.hpp"

namespace rr::algo {

// The ring position of `rank` in `order` (nranks entries, or null: rank
// order), and the rank at position `p` (any int, taken mod nranks): the
// arithmetic the ring and the chain share.
inline int ring_position(const int* order, int nranks, int rank) {
  if (!order) return rank;
  for (int p = 0; p < nranks; ++p) {
    if (order[p] == rank) return p;
  }
  return rank;
}
inline int rank_at_position(const int* order, int nranks, int p) {
  const int m = ((p % nranks) + nranks) % nranks;
  return order ? order[m] : m;
}

struct Range {
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
};

// Part `index` of `count` elements cut into `parts` contiguous pieces whose
// sizes differ by at most one, the longer ones first.
constexpr Range split(size_t count, size_t parts, size_t index) {
  const size_t base = count / parts;
  const size_t extra = count % parts;
  return Range{index * base + (index < extra ? index : extra), base + (index < extra ? 1 : 0)};
}

// Which halves of the ring run: allreduce runs both; reduce-scatter stops
// after the reduce steps; all-gather starts at the gather steps.
enum class RingPhases { kBoth, kReduceScatter, kAllGather };

class RingSchedule {
 public:
  // chunk_elems >= 1: the most elements one message carries. `shift` rotates
  // the segments: with shift = -1 rank r ends the reduce-scatter owning
  // segment r (what reduce-scatter and all-gather need) instead of r + 1.
  //
  // `order` (nranks entries, or null: rank order) is the rank at each
  // position of the ring (algo/ring_order.hpp). The arithmetic above then
  // runs on positions, and segment s holds block order[s] of the buffer, so
  // that with shift = -1 every rank still ends the reduce-scatter owning
  // its own block, wherever the ring put it.
  RingSchedule(int nranks, int rank, size_t count, size_t chunk_elems, int shift = 0,
               RingPhases phases = RingPhases::kBoth, const int* order = nullptr);

  int nranks() const { return nranks_; }
  int rank() const { return rank_; }
  int position() const { return position_; }
  int left() const { return at(position_ - 1); }
  int right() const { return at(position_ + 1); }

  int steps() const { return 2 * (nranks_ - 1); }  // of the whole ring; step numbers are absolute
  int first_step() const { return phases_ == RingPhases::kAllGather ? nranks_ - 1 : 0; }
  int end_step() const { return phases_ == RingPhases::kReduceScatter ? nranks_ - 1 : steps(); }
  RingPhases phases() const { return phases_; }
  bool is_reduce_step(int step) const { return step < nranks_ - 1; }
  bool is_last_reduce_step(int step) const { return step == nranks_ - 2; }
  // For messages: the half a step belongs to, and its number within that half.
  const char* phase_name(int step) const { return is_reduce_step(step) ? "reduce-scatter" : "all-gather"; }
  int phase_step(int step) const { return is_reduce_step(step) ? step : step - (nranks_ - 1); }
  // What a column does with the chunk that arrives at `step` (first_step()
  // <= step < end_step()); each column starts with a kSend of this rank's
  // own chunk (send_segment(first_step())). Reduce steps reduce and send on,
  // the last one keeping the final segment (and sending it on when the
  // all-gather follows); gather steps keep and send on, the last one keeps.
  Primitive primitive(int step) const {
    const bool last = step + 1 == end_step();
    if (is_reduce_step(step)) {
      if (!is_last_reduce_step(step)) return Primitive::kRecvReduceSend;
      return last ? Primitive::kRecvReduceCopy : Primitive::kRecvReduceCopySend;
    }
    return last ? Primitive::kRecv : Primitive::kRecvCopySend;
  }

  // Chunk columns: every segment is cut into this many chunks.
  size_t columns() const { return columns_; }
  // Elements of the whole buffer the ring runs over (N segments).
  size_t count() const { return count_; }

  int send_segment(int step) const { return mod(position_ - step + shift_); }
  int recv_segment(int step) const { return mod(position_ - step - 1 + shift_); }
  // The segment this rank holds fully reduced after the reduce-scatter.
  int owned_segment() const { return mod(position_ + 1 + shift_); }

  Range segment(int index) const {
    return split(count_, static_cast<size_t>(nranks_), static_cast<size_t>(order_ ? order_[index] : index));
  }
  // Elements of chunk `column` of segment `index`, as offsets into the whole buffer.
  Range chunk(int index, size_t column) const {
    const Range seg = segment(index);
    const Range part = split(seg.count, columns_, column);
    return Range{seg.offset + part.offset, part.count};
  }
  // Where `chunk` sits in the call's buffers (exec/call.hpp lays them out by
  // phase): in send, of which all-gather's holds only this rank's segment,
  // and in recv, of which reduce-scatter's holds only the owned segment.
  // Every executor of the ring reads and writes the buffers through these.
  size_t send_offset(const Range& chunk) const { return chunk.offset - send_base_; }
  size_t recv_offset(const Range& chunk) const { return chunk.offset - recv_base_; }

 private:
  int mod(int x) const { return ((x % nranks_) + nranks_) % nranks_; }
  // The rank at ring position `p` (any int, taken mod nranks).
  int at(int p) const { return rank_at_position(order_, nranks_, p); }

  int nranks_;
  int rank_;
  const int* order_;
  int position_;
  size_t count_;
  size_t columns_;
  int shift_;
  RingPhases phases_;
  size_t send_base_ = 0;  // where send starts in the whole buffer
  size_t recv_base_ = 0;  // ... and recv
};

}  // namespace rr::algo
