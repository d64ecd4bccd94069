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

size_t StagedCollectives::segment_elems(size_t elem_bytes, size_t blocks) const {
  return std::max<size_t>(1, segment_bytes_ / (elem_bytes * blocks));
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
  const size_t elem = reduce::dtype_size(dtype);
  const size_t per_segment = segment_elems(elem, 1);
  const size_t segments = (count + per_segment - 1) / per_segment;
  auto elems = [&](size_t k) { return std::min(per_segment, count - k * per_segment); };
  return pipeline(
      segments,
      [&](size_t k, void* slot) {
        const size_t offset = k * per_segment * elem;
        const size_t bytes = elems(k) * elem;
        return SegmentCopies{memory::contiguous(slot, at(send, offset), bytes),
                             memory::contiguous(at(recv, offset), slot, bytes)};
      },
      [&](size_t k, void* slot) { return comm_->allreduce(slot, slot, elems(k), dtype, op); });
}

Status StagedCollectives::reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype,
                                         rrRedOp_t op) {
  const size_t elem = reduce::dtype_size(dtype);
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  // A segment is columns [k * per_segment, ...) of every rank's block: the
  // slot holds them as `ranks` blocks of elems(k), so the host call is an
  // in-place reduce-scatter of elems(k) per rank.
  const size_t per_segment = segment_elems(elem, ranks);
  const size_t segments = (recvcount + per_segment - 1) / per_segment;
  auto elems = [&](size_t k) { return std::min(per_segment, recvcount - k * per_segment); };
  return pipeline(
      segments,
      [&](size_t k, void* slot) {
        const size_t offset = k * per_segment * elem;
        const size_t bytes = elems(k) * elem;
        const memory::Copy in{slot, bytes, at(send, offset), recvcount * elem, bytes, ranks};
        return SegmentCopies{in, memory::contiguous(at(recv, offset), at(slot, rank * bytes), bytes)};
      },
      [&](size_t k, void* slot) {
        return comm_->reduce_scatter(slot, at(slot, rank * elems(k) * elem), elems(k), dtype, op);
      });
}

Status StagedCollectives::all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype) {
  const size_t elem = reduce::dtype_size(dtype);
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  // The slot holds segment k of every rank's block, rank r's at r * elems(k):
  // this rank's comes in, the host all-gather fills the others in place,
  // and all go back to their blocks of recv.
  const size_t per_segment = segment_elems(elem, ranks);
  const size_t segments = (sendcount + per_segment - 1) / per_segment;
  auto elems = [&](size_t k) { return std::min(per_segment, sendcount - k * per_segment); };
  return pipeline(
      segments,
      [&](size_t k, void* slot) {
        const size_t offset = k * per_segment * elem;
        const size_t bytes = elems(k) * elem;
        const memory::Copy out{at(recv, offset), sendcount * elem, slot, bytes, bytes, ranks};
        return SegmentCopies{memory::contiguous(at(slot, rank * bytes), at(send, offset), bytes), out};
      },
      [&](size_t k, void* slot) {
        return comm_->all_gather(at(slot, rank * elems(k) * elem), slot, elems(k), dtype);
      });
}

Status StagedCollectives::broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  const size_t elem = reduce::dtype_size(dtype);
  const bool is_root = comm_->rank() == root;
  const size_t per_segment = segment_elems(elem, 1);
  const size_t segments = (count + per_segment - 1) / per_segment;
  auto elems = [&](size_t k) { return std::min(per_segment, count - k * per_segment); };
  return pipeline(
      segments,
      [&](size_t k, void* slot) {
        const size_t offset = k * per_segment * elem;
        const size_t bytes = elems(k) * elem;
        SegmentCopies copies;
        // Only the root's data comes in; the root in place has it already.
        if (is_root) copies.in = memory::contiguous(slot, at(send, offset), bytes);
        if (!is_root || send != recv) copies.out = memory::contiguous(at(recv, offset), slot, bytes);
        return copies;
      },
      [&](size_t k, void* slot) { return comm_->broadcast(slot, slot, elems(k), dtype, root); });
}

Status StagedCollectives::reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                                 int root) {
  const size_t elem = reduce::dtype_size(dtype);
  const bool is_root = comm_->rank() == root;
  const size_t per_segment = segment_elems(elem, 1);
  const size_t segments = (count + per_segment - 1) / per_segment;
  auto elems = [&](size_t k) { return std::min(per_segment, count - k * per_segment); };
  return pipeline(
      segments,
      [&](size_t k, void* slot) {
        const size_t offset = k * per_segment * elem;
        const size_t bytes = elems(k) * elem;
        SegmentCopies copies;
        copies.in = memory::contiguous(slot, at(send, offset), bytes);
        // Only the root has a result.
        if (is_root) copies.out = memory::contiguous(at(recv, offset), slot, bytes);
        return copies;
      },
      [&](size_t k, void* slot) { return comm_->reduce(slot, slot, elems(k), dtype, op, root); });
}

}  // namespace rr
