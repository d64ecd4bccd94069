#include "comm/staged_collectives.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "algo/ring.hpp"
#include "comm/communicator.hpp"
#include "comm/operation_queue.hpp"
#include "common/poll.hpp"
#include "reduce/reduce.hpp"

namespace rr {

namespace {
// Markers: [slot] the slot's last copy back landed; then the end of each lane.
int out_marker(size_t slot) { return static_cast<int>(slot); }
constexpr int kToDeviceEnd = static_cast<int>(StagedCollectives::kSlots);
constexpr int kToHostEnd = kToDeviceEnd + 1;
static_assert(kToHostEnd < memory::CopyEngine::kMarkers, "a marker per slot and per lane");

uint8_t* at(void* p, size_t offset) { return static_cast<uint8_t*>(p) + offset; }
const uint8_t* at(const void* p, size_t offset) { return static_cast<const uint8_t*>(p) + offset; }
}  // namespace

StagedCollectives::StagedCollectives(Communicator* comm, memory::CopyEngine* engine, size_t segment_bytes)
    : comm_(comm), engine_(engine), segment_bytes_(segment_bytes) {}

Status StagedCollectives::init() {
  // A segment holds at least one element of each of two blocks per rank
  // (all-to-all's send and receive blocks), whatever the segment size.
  const size_t one_column = 2 * static_cast<size_t>(comm_->size()) * sizeof(uint64_t);
  return engine_->reserve_slots(std::max(segment_bytes_, one_column), kSlots);
}

void StagedCollectives::set_device_reductions(bool on, int timeout_ms) {
  reducer_ = on ? std::make_unique<SegmentReducer>(engine_, timeout_ms) : nullptr;
}

Status StagedCollectives::SegmentReducer::reduce(void* dst, const void* mine, const void* arrived, size_t count,
                                                 rrDataType_t, rrRedOp_t, bool last, int nranks) {
  // The dtype and op are the server's (the plan's).
  memory::Reduction reduction;
  reduction.dst = dst;
  reduction.mine = mine;
  reduction.arrived = arrived;
  reduction.count = count;
  reduction.last = last;
  reduction.divisor = nranks;
  return engine_->post_reduction(segment, reduction, timeout_ms_, give_up);
}

void StagedCollectives::release_through(uint64_t last) {
  engine_->end_reductions(last);
  engine_->release(last);
}

StagedCollectives::Segments StagedCollectives::segments(size_t count, rrDataType_t dtype, size_t blocks) const {
  const size_t elem = reduce::dtype_size(dtype);
  return Segments{elem, std::max<size_t>(1, segment_bytes_ / (elem * blocks)), count};
}

uint64_t StagedCollectives::take_counts(const Plan& plan) {
  return plan.segments == 0 ? 0 : engine_->take_counts(plan.segments);
}

Status StagedCollectives::issue(const Plan& plan, uint64_t first, IssueProgress* progress) {
  IssueProgress own;
  if (!progress) progress = &own;
  Status status = issue_segments(plan, first, progress);
  if (status.ok()) {
    progress->state_.store(IssueProgress::kIssued);
  } else {
    progress->fail(status);
  }
  return status;
}

Status StagedCollectives::issue_segments(const Plan& plan, uint64_t first, IssueProgress* progress) {
  const size_t n = plan.segments;
  if (n == 0) return Status::Ok();
  if (engine_->slots() < kSlots) return InternalError("staging: the slots were not made (init)");
  // A segment is runnable once its signal is on the lanes, and its server
  // where it has one.
  size_t signalled = 0;
  size_t served = 0;
  auto publish = [&] { progress->runnable_.store(plan.serve ? std::min(signalled, served) : signalled); };
  // Segment k comes into slot k % kSlots once the slot's last copy back
  // (segment k - kSlots, or an earlier call's) landed, and says so.
  auto copy_in = [&](size_t k) -> Status {
    const size_t s = k % kSlots;
    RR_RETURN_IF_ERROR(engine_->after(memory::Lane::kToHost, out_marker(s)));
    const SegmentCopies copies = plan.copies(k, engine_->slot(s));
    if (copies.in.rows > 0) RR_RETURN_IF_ERROR(engine_->copy(memory::Lane::kToHost, copies.in));
    RR_RETURN_IF_ERROR(engine_->signal(memory::Lane::kToHost, first + k));
    signalled = k + 1;
    publish();
    return Status::Ok();
  };
  // Segment k goes back once the host released it (its collective is done).
  auto copy_out = [&](size_t k) -> Status {
    const size_t s = k % kSlots;
    // Its reductions' server first: in one hardware queue it must run before
    // the copy back, which waits for the segment to end.
    if (plan.serve) RR_RETURN_IF_ERROR(engine_->serve_reductions(memory::Lane::kReduce, first + k, plan.dtype, plan.op));
    served = k + 1;
    publish();
    RR_RETURN_IF_ERROR(engine_->wait_release(memory::Lane::kToDevice, first + k));
    const SegmentCopies copies = plan.copies(k, engine_->slot(s));
    if (copies.out.rows > 0) RR_RETURN_IF_ERROR(engine_->copy(memory::Lane::kToDevice, copies.out));
    return engine_->record(memory::Lane::kToDevice, out_marker(s));
  };
  // Issue order = an order every dependency respects: the first slots' copies
  // in; then each copy back, followed by the copy in that reuses its slot.
  Status status;
  for (size_t k = 0; k < std::min(n, kSlots) && status.ok(); ++k) status = copy_in(k);
  for (size_t k = 0; k < n && status.ok(); ++k) {
    status = copy_out(k);
    if (status.ok() && k + kSlots < n) status = copy_in(k + kSlots);
  }
  return status;
}

Status StagedCollectives::run(const Plan& plan, uint64_t first, const std::function<bool()>& give_up,
                              const IssueProgress* progress) {
  const size_t n = plan.segments;
  const bool served = plan.serve && reducer_;
  if (served) reducer_->give_up = give_up;
  auto stop = stop_test(progress, give_up);
  auto stopped = [&](size_t k, Status waited) {
    if (waited.ok() || !progress || !progress->lost(k)) return waited;
    return InternalError("segment " + std::to_string(k) + " of " + std::to_string(n) + " was not issued");
  };
  Status status;
  size_t k = 0;
  for (; k < n && status.ok(); ++k) {
    // Segment k's input is in its slot; reduce (or gather, or forward) it
    // across the ranks there; then let its server end and its copy back go.
    status = stopped(k, engine_->wait_arrived(first + k, [&] { return stop(k); }));
    if (status.ok() && served && progress) {
      // Its server is issued after the next segments' copies in: wait for
      // it (the issuing thread may be held by a full lane a while), or a
      // reduction would wait on a server that never comes.
      (void)poll([&] { return progress->ready(k) || stop(k); }, 1000);
      if (!progress->ready(k)) {
        status = stopped(k, InvalidUsage("gave up waiting for the server of segment " + std::to_string(k)));
      }
    }
    if (served) reducer_->segment = first + k;
    if (status.ok()) status = plan.collective(k, engine_->slot(k % kSlots));
    release_through(first + k);
  }
  // Failed at segment k - 1: the copies in of the segments after it may
  // still be landing.
  if (!status.ok()) release_landed(plan, first, k, stop);
  return status;
}

std::function<bool(size_t k)> StagedCollectives::stop_test(const IssueProgress* progress,
                                                           const std::function<bool()>& give_up) {
  return [progress, &give_up](size_t k) { return (progress && progress->lost(k)) || (give_up && give_up()); };
}

void StagedCollectives::release_landed(const Plan& plan, uint64_t first, size_t k,
                                       const std::function<bool(size_t k)>& stop) {
  // Each segment once it landed (a copy back released sooner would read its
  // slot while the copy in writes it); not waiting for those that will not
  // come.
  const size_t n = plan.segments;
  for (; k < n; ++k) {
    const Status landed = engine_->wait_arrived(first + k, [&] { return stop(k); });
    release_through(first + k);
    if (!landed.ok()) break;
  }
  if (n > 0) release_through(first + n - 1);
}

Status StagedCollectives::submit(OperationQueue& queue, std::shared_ptr<const Plan> plan, Submission submission,
                                 bool* refused) {
  *refused = false;
  if (plan->segments == 0) return Status::Ok();
  const uint64_t first = take_counts(*plan);
  auto progress = std::make_shared<IssueProgress>();
  auto started = std::make_shared<bool>(false);
  // Whether the failure was reported (on the queue's thread only).
  auto reported = std::make_shared<bool>(false);
  auto failed = std::make_shared<std::function<void(const Status&, uint64_t)>>(std::move(submission.failed));
  auto host_half = [this, plan, first, progress, started, reported, failed, enter = std::move(submission.enter),
                    give_up = std::move(submission.give_up), call = submission.call] {
    *started = true;
    Communicator::CallScope own(comm_, call);
    Status status = enter ? enter() : Status::Ok();
    if (status.ok()) {
      status = run(*plan, first, give_up, progress.get());
    } else {
      // No collective runs; every segment is released once it landed.
      release_landed(*plan, first, 0, stop_test(progress.get(), give_up));
    }
    if (!status.ok() && *failed) {
      (*failed)(progress->failure().ok() ? status : progress->failure(), first);
      *reported = true;
    }
    return status;
  };
  auto operation = queue.enqueue(std::move(host_half));
  Status refusal;
  if (queue.test(*operation, &refusal) && !*started) {
    // The queue is closing and will never run it: issue nothing.
    *refused = true;
    return refusal;
  }
  Status issued = issue(*plan, first, progress.get());
  if (!issued.ok() && *failed) {
    // The host half may have ended well before the issue failed (in the
    // last copies back, which it does not wait for): then report it after
    // it, on the queue's thread, unless it did.
    queue.enqueue([first, issued, reported, failed] {
      if (!*reported) (*failed)(issued, first);
      return Status::Ok();
    });
  }
  Status ordered = submission.after_issue ? submission.after_issue() : Status::Ok();
  return issued.ok() ? ordered : issued;
}

Status StagedCollectives::run_now(const Plan& plan) {
  // As a stream-ordered call (submit()), on the communicator's queue: its
  // collectives take the communicator's turn, as every call does (between
  // calls the idle-progress thread drives the transport).
  if (plan.segments == 0) return Status::Ok();
  Status failure;
  Submission submission;
  submission.failed = [&failure](const Status& cause, uint64_t) { failure = cause; };
  OperationQueue& queue = comm_->queue();
  bool refused = false;
  Status status = submit(queue, std::make_shared<const Plan>(plan), std::move(submission), &refused);
  // The host half (and any report of a failed issue) ran once an operation
  // queued after them has.
  auto drained = queue.enqueue([] { return Status::Ok(); });
  (void)queue.wait(*drained);
  if (status.ok()) status = failure;
  // No copy may still touch the caller's buffers or a slot once the call
  // returns: wait for the end of each lane, also after a failed issue.
  Status ends = engine_->record(memory::Lane::kToDevice, kToDeviceEnd);
  if (ends.ok()) ends = engine_->record(memory::Lane::kToHost, kToHostEnd);
  if (ends.ok()) ends = engine_->wait(kToDeviceEnd);
  if (ends.ok()) ends = engine_->wait(kToHostEnd);
  return status.ok() ? ends : status;
}

StagedCollectives::Plan StagedCollectives::host_call(std::function<Status()> body) {
  Plan plan;
  plan.segments = 1;
  plan.copies = [](size_t, void*) { return SegmentCopies{}; };
  plan.collective = [body = std::move(body)](size_t, void*) { return body(); };
  return plan;
}

StagedCollectives::Plan StagedCollectives::allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype,
                                                     rrRedOp_t op) const {
  const Segments seg = segments(count, dtype, 1);
  Communicator* comm = comm_;
  exec::Reducer* reducer = comm_->size() > 1 ? reducer_.get() : nullptr;
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    SegmentCopies copies{memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k)),
                         memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k))};
    if (reducer) {
      // The ring reads from the slot only the segment this rank sends first,
      // unreduced (its own: algo::RingSchedule, shift 0); every other part
      // is written there (a reduction, or a chunk received) before it is read.
      const algo::Range own = algo::split(seg.elems(k), ranks, rank);
      copies.in = memory::contiguous(at(slot, own.offset * seg.elem), at(send, seg.offset(k) + own.offset * seg.elem),
                                     own.count * seg.elem);
    }
    return copies;
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->allreduce(slot, slot, seg.elems(k), dtype, op, reducer, reducer ? at(send, seg.offset(k)) : nullptr);
  };
  plan.serve = reducer != nullptr;
  plan.dtype = dtype;
  plan.op = op;
  return plan;
}

StagedCollectives::Plan StagedCollectives::reduce_scatter(const void* send, void* recv, size_t recvcount,
                                                          rrDataType_t dtype, rrRedOp_t op) const {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  Communicator* comm = comm_;
  // A segment is columns [k * seg.per, ...) of every rank's block: the slot
  // holds them as `ranks` blocks of seg.elems(k), so the host call is an
  // in-place reduce-scatter of seg.elems(k) per rank.
  const Segments seg = segments(recvcount, dtype, ranks);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    const size_t bytes = seg.bytes(k);
    const memory::Copy in{slot, bytes, at(send, seg.offset(k)), recvcount * seg.elem, bytes, ranks};
    return SegmentCopies{in, memory::contiguous(at(recv, seg.offset(k)), at(slot, rank * bytes), bytes)};
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->reduce_scatter(slot, at(slot, rank * seg.bytes(k)), seg.elems(k), dtype, op);
  };
  return plan;
}

StagedCollectives::Plan StagedCollectives::all_gather(const void* send, void* recv, size_t sendcount,
                                                      rrDataType_t dtype) const {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  Communicator* comm = comm_;
  // The slot holds segment k of every rank's block, rank r's at
  // r * seg.bytes(k): this rank's comes in, the host all-gather fills the
  // others in place, and all go back to their blocks of recv.
  const Segments seg = segments(sendcount, dtype, ranks);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    const size_t bytes = seg.bytes(k);
    const memory::Copy out{at(recv, seg.offset(k)), sendcount * seg.elem, slot, bytes, bytes, ranks};
    return SegmentCopies{memory::contiguous(at(slot, rank * bytes), at(send, seg.offset(k)), bytes), out};
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->all_gather(at(slot, rank * seg.bytes(k)), slot, seg.elems(k), dtype);
  };
  return plan;
}

StagedCollectives::Plan StagedCollectives::broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype,
                                                     int root) const {
  const bool is_root = comm_->rank() == root;
  Communicator* comm = comm_;
  const Segments seg = segments(count, dtype, 1);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    SegmentCopies copies;
    // Only the root's data comes in; the root in place has it already.
    if (is_root) copies.in = memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k));
    if (!is_root || send != recv) copies.out = memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k));
    return copies;
  };
  plan.collective = [=](size_t k, void* slot) { return comm->broadcast(slot, slot, seg.elems(k), dtype, root); };
  return plan;
}

StagedCollectives::Plan StagedCollectives::reduce(const void* send, void* recv, size_t count, rrDataType_t dtype,
                                                  rrRedOp_t op, int root) const {
  const bool is_root = comm_->rank() == root;
  Communicator* comm = comm_;
  const Segments seg = segments(count, dtype, 1);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    SegmentCopies copies;
    copies.in = memory::contiguous(slot, at(send, seg.offset(k)), seg.bytes(k));
    // Only the root has a result.
    if (is_root) copies.out = memory::contiguous(at(recv, seg.offset(k)), slot, seg.bytes(k));
    return copies;
  };
  plan.collective = [=](size_t k, void* slot) { return comm->reduce(slot, slot, seg.elems(k), dtype, op, root); };
  return plan;
}

StagedCollectives::Plan StagedCollectives::gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype,
                                                  int root) const {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  const bool is_root = comm_->rank() == root;
  Communicator* comm = comm_;
  // As all_gather, with only the root's slot filled and copied back: the
  // slot holds segment k of every rank's block, rank r's at r * seg.bytes(k),
  // which is the host gather's in-place form on the root.
  const Segments seg = segments(sendcount, dtype, ranks);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    const size_t bytes = seg.bytes(k);
    SegmentCopies copies;
    copies.in = memory::contiguous(at(slot, rank * bytes), at(send, seg.offset(k)), bytes);
    if (is_root) copies.out = memory::Copy{at(recv, seg.offset(k)), sendcount * seg.elem, slot, bytes, bytes, ranks};
    return copies;
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->gather(at(slot, rank * seg.bytes(k)), slot, seg.elems(k), dtype, root);
  };
  return plan;
}

StagedCollectives::Plan StagedCollectives::scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype,
                                                   int root) const {
  const size_t ranks = static_cast<size_t>(comm_->size());
  const size_t rank = static_cast<size_t>(comm_->rank());
  const bool is_root = comm_->rank() == root;
  Communicator* comm = comm_;
  // As reduce_scatter's layout: the root's slot holds segment k of every
  // rank's block; each rank's part lands at rank * seg.bytes(k) of its slot.
  const Segments seg = segments(recvcount, dtype, ranks);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    const size_t bytes = seg.bytes(k);
    SegmentCopies copies;
    if (is_root) copies.in = memory::Copy{slot, bytes, at(send, seg.offset(k)), recvcount * seg.elem, bytes, ranks};
    copies.out = memory::contiguous(at(recv, seg.offset(k)), at(slot, rank * bytes), bytes);
    return copies;
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->scatter(slot, at(slot, rank * seg.bytes(k)), seg.elems(k), dtype, root);
  };
  return plan;
}

StagedCollectives::Plan StagedCollectives::all_to_all(const void* send, void* recv, size_t count,
                                                      rrDataType_t dtype) const {
  const size_t ranks = static_cast<size_t>(comm_->size());
  Communicator* comm = comm_;
  // The slot holds segment k of every block of send, then segment k of every
  // block of recv (the host call's buffers must not overlap): `ranks` blocks
  // of seg.bytes(k) each.
  const Segments seg = segments(count, dtype, 2 * ranks);
  Plan plan;
  plan.segments = seg.number();
  plan.copies = [=](size_t k, void* slot) {
    const size_t bytes = seg.bytes(k);
    const size_t pitch = count * seg.elem;
    return SegmentCopies{memory::Copy{slot, bytes, at(send, seg.offset(k)), pitch, bytes, ranks},
                         memory::Copy{at(recv, seg.offset(k)), pitch, at(slot, ranks * bytes), bytes, bytes, ranks}};
  };
  plan.collective = [=](size_t k, void* slot) {
    return comm->all_to_all(slot, at(slot, ranks * seg.bytes(k)), seg.elems(k), dtype);
  };
  return plan;
}

}  // namespace rr
