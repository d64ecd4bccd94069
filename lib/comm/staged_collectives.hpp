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
// A call is a Plan (what each segment copies and which host collective it
// runs) and runs in two halves:
//   issue(): the device half, at once: every copy of every segment goes on
//     the copy engine's lanes, each copy in gated by its slot's last copy
//     back (a marker) and followed by a signal, each copy back gated by the
//     host's release of its segment (memory/copy_engine.hpp);
//   run(): the host half (on the communicator's queue): per segment, wait
//     for its signal, run its collective on the slot, release it.
// The device half never waits on anything issued after it, so it cannot
// deadlock however the GPU maps the lanes onto hardware queues. It is issued
// on the caller's thread once the host half is queued where it can run
// meanwhile: issuing blocks when a lane's queue is full, until the host half
// released enough of it. submit() does both so on the communicator's queue,
// for a stream-ordered call (comm/stream_order.hpp); run_now() does the
// same and waits for the host half and the copies.
//
// The copies go through a memory::CopyEngine (CUDA streams, or host threads
// in tests); the host collective is the Communicator's own, so each segment
// is one collective of the communicator (with its argument check): every
// rank must stage the same call (device buffers on every rank, or host
// buffers on every rank), or the ranks' calls do not match.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "comm/call_settings.hpp"
#include "common/status.hpp"
#include "exec/reducer.hpp"
#include "memory/copy_engine.hpp"
#include "ringreduce/ringreduce.h"

namespace rr {

class Communicator;
class OperationQueue;

class StagedCollectives {
 public:
  // Slots in the pool: one copying in, one in the collective, one copying
  // back. Fewer would serialize a stage; more adds memory, not overlap.
  static constexpr size_t kSlots = 3;

  // One segment's copies: into the slot, and out of it (rows == 0: none).
  struct SegmentCopies {
    memory::Copy in;
    memory::Copy out;
  };
  // A staged call. Both functions are pure descriptions of segment k (they
  // may be called more than once) and own what they need: a plan outlives
  // the call that made it.
  struct Plan {
    size_t segments = 0;
    std::function<SegmentCopies(size_t k, void* slot)> copies;
    std::function<Status(size_t k, void* slot)> collective;
    // The collective's reductions run on the engine's reduction servers
    // (set_device_reductions), of this dtype and op.
    bool serve = false;
    rrDataType_t dtype = rrFloat32;
    rrRedOp_t op = rrSum;
  };

  StagedCollectives(Communicator* comm, memory::CopyEngine* engine, size_t segment_bytes);

  // Makes the slots (once); call before the first collective.
  Status init();
  // With `on`, allreduce's received chunks are reduced by the engine's
  // reduction servers (a kernel per segment, issued with the copies:
  // kernels/reduce_server.hpp), with this rank's values read from the device
  // buffer; then only the part of a segment this rank sends first (its own
  // ring segment) is copied in. Off: on the host, from the slot. The slots
  // and the communicator's ring staging must be memory the servers can read
  // and write. A reduction not run within `timeout_ms` fails the call.
  void set_device_reductions(bool on, int timeout_ms);

  // Plans of the Communicator's calls of the same names; the buffers are in
  // the engine's device memory.
  Plan allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op) const;
  Plan reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype, rrRedOp_t op) const;
  Plan all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype) const;
  Plan broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) const;
  Plan reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op, int root) const;
  Plan gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype, int root) const;
  Plan scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype, int root) const;
  Plan all_to_all(const void* send, void* recv, size_t count, rrDataType_t dtype) const;
  // One segment without copies that runs `body`: a call on host buffers,
  // ordered on a stream like the staged ones.
  static Plan host_call(std::function<Status()> body);

  // The plan's counts on the engine: segment k is count first + k (0 when
  // the plan has no segments). Calls take them in the order their host
  // halves run.
  uint64_t take_counts(const Plan& plan);
  // How far a call's device half is issued, as its host half (which may run
  // meanwhile) needs to know: the leading segments whose copy in, signal
  // and reduction server are on the lanes, and how the issue ended (its
  // error, when it failed). The issuing thread writes, the host half reads.
  class IssueProgress {
   public:
    // ready: segment k will arrive and has its server. lost: the issue
    // failed before making it runnable (its copy in may still land; its
    // copy back was not issued). Both false while it is being issued.
    bool ready(size_t k) const { return state_.load() == kIssued || runnable_.load() > k; }
    bool lost(size_t k) const { return state_.load() == kFailed && runnable_.load() <= k; }
    // The issue's error (Ok while issuing or once issued).
    Status failure() const { return state_.load() == kFailed ? failure_ : Status::Ok(); }
    // The issue ended with `failure` (issue() says so itself; a caller whose
    // own work before issue() failed says it instead of calling issue()).
    void fail(const Status& failure) {
      failure_ = failure;
      state_.store(kFailed);
    }

   private:
    friend class StagedCollectives;
    enum { kIssuing, kIssued, kFailed };
    std::atomic<size_t> runnable_{0};
    std::atomic<int> state_{kIssuing};
    Status failure_;  // written before state_ becomes kFailed
  };

  // The device half, on counts from take_counts. Issuing may block until the
  // lanes drained some (as CUDA's launch queue does when full), which may
  // take this call's own host half: start that first, where it can run
  // meanwhile, and pass both the same `progress`. On failure, what it issued
  // waits for its counts: the host half runs the segments issued and
  // releases every count.
  Status issue(const Plan& plan, uint64_t first, IssueProgress* progress = nullptr);
  // The host half, in the order the counts were taken. However it ends,
  // every segment of the plan is released, each only once its copy in
  // landed (unless given up), in order after the host halves before it (a
  // count released early would let a copy back run before its collective).
  // `give_up` as for CopyEngine::wait_arrived; `progress` (null: all issued
  // already) stops it at the first segment the issue did not reach.
  Status run(const Plan& plan, uint64_t first, const std::function<bool()>& give_up = {},
             const IssueProgress* progress = nullptr);
  // What a stream-ordered call adds around its two halves
  // (comm/stream_order.hpp).
  struct Submission {
    // On the queue's thread, before the host half; its failure ends the
    // call there (the segments are still released).
    std::function<Status()> enter;
    // The host half's give-up test (as run()'s).
    std::function<bool()> give_up;
    // On the submitting thread, once the device half was issued, or failed
    // to be: what orders later work after it. Its failure is the call's.
    std::function<Status()> after_issue;
    // On the queue's thread, once per failed call: the host half failed,
    // or the issue did (also after the host half ended well: its last
    // copies back are not issued). `cause` is the issue's failure when there
    // was one (the peers ran the whole call, this rank may not have), else
    // the host half's.
    std::function<void(const Status& cause, uint64_t first)> failed;
    // The call's own settings (rrCollConfig_t), the host half's while it
    // runs; by default the communicator's when it runs.
    CallSettings call;
  };
  // Takes the plan's counts, queues its host half on `queue` (program order
  // with the queue's other work), then issues its device half on this
  // thread, then after_issue: issuing may block until the host half
  // released enough, so the host half must be queued first. Not ok: the
  // queue refused the call (*refused true; nothing issued), or the issue or
  // after_issue failed (the host half stops where the issue did).
  Status submit(OperationQueue& queue, std::shared_ptr<const Plan> plan, Submission submission, bool* refused);

  // Both halves, as submit() on the communicator's queue; returns once no
  // copy of the plan runs any more (also after a failure).
  Status run_now(const Plan& plan);

  size_t segment_bytes() const { return segment_bytes_; }

 private:
  // How `count` elements of `elem` bytes fall into segments that each hold
  // `blocks` blocks of them (one per rank for reduce-scatter, all-gather,
  // gather and scatter; two per rank for all-to-all).
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

  // Whether the host half stops waiting for segment k: the issue did not
  // reach it, or `give_up` (which must outlive the test).
  static std::function<bool(size_t k)> stop_test(const IssueProgress* progress, const std::function<bool()>& give_up);
  // After a failure at segment k - 1: releases segments k.. each once its
  // copy in landed, or at once from the first that stop(k) says will not.
  void release_landed(const Plan& plan, uint64_t first, size_t k, const std::function<bool(size_t k)>& stop);
  // issue()'s work; publishes in `progress` the segments it made runnable.
  Status issue_segments(const Plan& plan, uint64_t first, IssueProgress* progress);
  // Lets every lane go on up to count `last`: its waits, and its servers.
  void release_through(uint64_t last);

  // The ring's reducer while a served segment runs: posts to its server.
  class SegmentReducer : public exec::Reducer {
   public:
    SegmentReducer(memory::CopyEngine* engine, int timeout_ms) : engine_(engine), timeout_ms_(timeout_ms) {}
    Status reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype,
                  rrRedOp_t op, bool last, int nranks) override;
    uint64_t segment = 0;  // the count of the segment running
    std::function<bool()> give_up;  // the running call's (run())

   private:
    memory::CopyEngine* engine_;
    int timeout_ms_;
  };

  Communicator* comm_;
  memory::CopyEngine* engine_;
  size_t segment_bytes_;
  std::unique_ptr<SegmentReducer> reducer_;  // null: host reductions
};

}  // namespace rr
