#include "comm/staged_collectives.hpp"

#include <algorithm>

#include "comm/communicator.hpp"
#include "reduce/reduce.hpp"

namespace rr {

namespace {
// Markers: [slot] the copy in landed, [kSlots + slot] the copy back landed.
int in_marker(size_t slot) { return static_cast<int>(slot); }
int out_marker(size_t slot) { return static_cast<int>(StagedCollectives::kSlots + slot); }
static_assert(2 * StagedCollectives::kSlots <= memory::CopyEngine::kMarkers, "two markers per slot");

uint8_t* at(void* p, size_t offset) { return static_cast<uint8_t*>(p) + offset; }
const uint8_t* at(const void* p, size_t offset) { return static_cast<const uint8_t*>(p) + offset; }
}  // namespace

StagedCollectives::StagedCollectives(Communicator* comm, memory::CopyEngine* engine, size_t segment_bytes)
    : comm_(comm), engine_(engine), segment_bytes_(segment_bytes) {}

Status StagedCollectives::init() {
  // A segment holds at least one element of every rank's block (reduce-scatter,
  // all-gather), whatever the segment size.
  const size_t one_column = static_cast<size_t>(comm_->size()) * sizeof(uint64_t);
  return engine_->reserve_slots(std::max(segment_bytes_, one_column), kSlots);
}

StagedCollectives::Segments StagedCollectives::segments(size_t count, rrDataType_t dtype, size_t blocks) const {
  const size_t elem = reduce::dtype_size(dtype);
  return Segments{elem, std::max<size_t>(1, segment_bytes_ / (elem * blocks)), count};
}

void StagedCollectives::drain() {
  for (int marker = 0; marker < static_cast<int>(2 * kSlots); ++marker) (void)engine_->wait(marker);
}

template <typename Plan, typename Collective>
Status StagedCollectives::pipeline(size_t segments, Plan&& plan, Collective&& collective) {
  if (engine_->slots() < kSlots) return InternalError("staging: the slots were not made (init)");
  // Issues segment k's copy into its slot, once the slot's last copy back
  // (segment k - kSlots) has landed.
  auto copy_in = [&](size_t k) -> Status {
    const size_t s = k % kSlots;
    if (k >= kSlots) RR_RETURN_IF_ERROR(engine_->wait(out_marker(s)));
    const SegmentCopies copies = plan(k, engine_->slot(s));
    if (copies.in.rows > 0) RR_RETURN_IF_ERROR(engine_->copy(memory::Lane::kToHost, copies.in));
    return engine_->record(memory::Lane::kToHost, in_marker(s));
  };
  auto run = [&]() -> Status {
    if (segments == 0) return Status::Ok();
    RR_RETURN_IF_ERROR(copy_in(0));
    for (size_t k = 0; k < segments; ++k) {
      const size_t s = k % kSlots;
      // Segment k+1 comes in while k is on the network and k-1 goes back.
      if (k + 1 < segments) RR_RETURN_IF_ERROR(copy_in(k + 1));
      // Wait for segment k's input.
      RR_RETURN_IF_ERROR(engine_->wait(in_marker(s)));
      // Reduce (or gather, or forward) it across the ranks, in the slot.
      RR_RETURN_IF_ERROR(collective(k, engine_->slot(s)));
      // Send the result back to the device.
      const SegmentCopies copies = plan(k, engine_->slot(s));
      if (copies.out.rows > 0) RR_RETURN_IF_ERROR(engine_->copy(memory::Lane::kToDevice, copies.out));
      RR_RETURN_IF_ERROR(engine_->record(memory::Lane::kToDevice, out_marker(s)));
    }
    // The call is done once every copy back has landed.
    for (size_t s = 0; s < std::min(segments, kSlots); ++s) RR_RETURN_IF_ERROR(engine_->wait(out_marker(s)));
    return Status::Ok();
  };
  Status status = run();
  if (!status.ok()) drain();
  return status;
}

Status StagedCollectives::allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op) {
  const Segments seg = segments(count, dtype, 1);
  return pipeline(
      seg.number(),
      [&](size_t k, void* slot) {
        return SegmentCopies{memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k)),
                             memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k))};
      },
      [&](size_t k, void* slot) { return comm_->allreduce(slot, slot, seg.elems(k), dtype, op); });
}

Status StagedCollectives::reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype,
                                         rrRedOp_t op) {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  // A segment is columns [k * seg.per, ...) of every rank's block: the slot
  // holds them as `ranks` blocks of seg.elems(k), so the host call is an
  // in-place reduce-scatter of seg.elems(k) per rank.
  const Segments seg = segments(recvcount, dtype, ranks);
  return pipeline(
      seg.number(),
      [&](size_t k, void* slot) {
        const size_t bytes = seg.bytes(k);
        const memory::Copy in{slot, bytes, at(send, seg.offset(k)), recvcount * seg.elem, bytes, ranks};
        return SegmentCopies{in, memory::contiguous(at(recv, seg.offset(k)), at(slot, rank * bytes), bytes)};
      },
      [&](size_t k, void* slot) {
        return comm_->reduce_scatter(slot, at(slot, rank * seg.bytes(k)), seg.elems(k), dtype, op);
      });
}

Status StagedCollectives::all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype) {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  // The slot holds segment k of every rank's block, rank r's at
  // r * seg.bytes(k): this rank's comes in, the host all-gather fills the
  // others in place, and all go back to their blocks of recv.
  const Segments seg = segments(sendcount, dtype, ranks);
  return pipeline(
      seg.number(),
      [&](size_t k, void* slot) {
        const size_t bytes = seg.bytes(k);
        const memory::Copy out{at(recv, seg.offset(k)), sendcount * seg.elem, slot, bytes, bytes, ranks};
        return SegmentCopies{memory::contiguous(at(slot, rank * bytes), at(send, seg.offset(k)), bytes), out};
      },
      [&](size_t k, void* slot) {
        return comm_->all_gather(at(slot, rank * seg.bytes(k)), slot, seg.elems(k), dtype);
      });
}

Status StagedCollectives::broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  const bool is_root = comm_->rank() == root;
  const Segments seg = segments(count, dtype, 1);
  return pipeline(
      seg.number(),
      [&](size_t k, void* slot) {
        SegmentCopies copies;
        // Only the root's data comes in; the root in place has it already.
        if (is_root) copies.in = memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k));
        if (!is_root || send != recv) copies.out = memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k));
        return copies;
      },
      [&](size_t k, void* slot) { return comm_->broadcast(slot, slot, seg.elems(k), dtype, root); });
}

Status StagedCollectives::reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                                 int root) {
  const bool is_root = comm_->rank() == root;
  const Segments seg = segments(count, dtype, 1);
  return pipeline(
      seg.number(),
      [&](size_t k, void* slot) {
        SegmentCopies copies;
        copies.in = memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k));
        // Only the root has a result.
        if (is_root) copies.out = memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k));
        return copies;
      },
      [&](size_t k, void* slot) { return comm_->reduce(slot, slot, seg.elems(k), dtype, op, root); });
}

}  // namespace rr
