#pragma once
// Collectives on device buffers through pinned host memory (DESIGN.md,
// "Memory": Debian's UCX has no CUDA transports). The tensor goes in
// segments of `segment_bytes`, each through a staging slot:
//
//   copy to the host (lane kToHost) -> the host collective on the slot, in
//   place -> copy back (lane kToDevice)
//
// with three slots, so that segment k+1's copy to the host and segment k-1's
// copy back run while segment k is on the network and being reduced. A
// rank's extra memory is 3 x segment_bytes, whatever the count.
//
// The copies go through a memory::CopyEngine (CUDA streams, or host threads
// in tests); the host collective is the Communicator's own, so each segment
// is one collective of the communicator (with its argument check): every
// rank must stage the same call (device buffers on every rank, or host
// buffers on every rank), or the ranks' calls do not match.
//
// Runs on the communicator's queue, as its other operations do.

#include <algorithm>
#include <cstddef>

#include "common/status.hpp"
#include "memory/copy_engine.hpp"
#include "ringreduce/ringreduce.h"

namespace rr {

class Communicator;

class StagedCollectives {
 public:
  // Slots in the pool: one copying in, one in the collective, one copying
  // back. Fewer would serialize a stage; more adds memory, not overlap.
  static constexpr size_t kSlots = 3;

  StagedCollectives(Communicator* comm, memory::CopyEngine* engine, size_t segment_bytes);

  // Makes the slots (once); call before the first collective.
  Status init();

  // As the Communicator's calls of the same names; the buffers are in the
  // engine's device memory.
  Status allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op);
  Status reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype, rrRedOp_t op);
  Status all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype);
  Status broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root);
  Status reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op, int root);

  size_t segment_bytes() const { return segment_bytes_; }

 private:
  // One segment's copies: into the slot, and out of it (rows == 0: none).
  struct SegmentCopies {
    memory::Copy in;
    memory::Copy out;
  };
  // Runs `segments` segments: plan(k, slot) gives segment k's copies,
  // collective(k, slot) runs its host collective. Returns once every copy
  // back has landed, also after a failure.
  template <typename Plan, typename Collective>
  Status pipeline(size_t segments, Plan&& plan, Collective&& collective);
  // Waits for every marker, after a failure: no copy may still touch the
  // caller's buffers or a slot once the call returns.
  void drain();
  // How `count` elements of `elem` bytes fall into segments that each hold
  // `blocks` blocks of them (one per rank for reduce-scatter and all-gather).
  struct Segments {
    size_t elem;       // bytes per element
    size_t per;        // elements per segment and block (never 0)
    size_t count;      // elements in all
    size_t number() const { return (count + per - 1) / per; }
    size_t elems(size_t k) const { return std::min(per, count - k * per); }
    size_t offset(size_t k) const { return k * per * elem; }  // bytes into a block
    size_t bytes(size_t k) const { return elems(k) * elem; }
  };
  Segments segments(size_t count, rrDataType_t dtype, size_t blocks) const;

  Communicator* comm_;
  memory::CopyEngine* engine_;
  size_t segment_bytes_;
};

}  // namespace rr
