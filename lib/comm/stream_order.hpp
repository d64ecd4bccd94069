#pragma once
// Stream-ordered calls (CUDA build), as NCCL's: a call with device buffers,
// or with a stream, returns at once; it runs after the work enqueued on the
// caller's stream before it, and work enqueued after it sees its result.
//
// At the call, on the calling thread, all of the call's GPU work is enqueued
// at once, every dependency as one CUDA sees:
//   1. an event on the caller's stream (the inputs are ready), which every
//      staging lane waits for;
//   2. the host half, queued on the communicator's queue so it runs in
//      program order with the communicator's other calls; queued first,
//      because enqueuing GPU work blocks while a stream's launch queue is
//      full, until the GPU drained it, which takes the host's releases;
//   3. the call's device half (StagedCollectives::issue): its copies in,
//      each followed by a signal to the host, and its copies back, each held
//      by a wait on a counter until the host releases its segment;
//   4. an event after the call's last work on each staging stream, which
//      the caller's stream waits for: later work there sees the result.
// On the queue's thread, the host half waits for each segment's signal, runs
// the segment's host collective, and releases it; also when it failed, so
// the stream never hangs. A failure is the communicator's async error
// (rrCommGetAsyncError); recvbuff's content is then undefined, as NCCL's. A
// device half that could not be issued is the call's own error, and the
// communicator's (the peers ran the whole call; a CUDA error breaks it); its
// host half stops at the first segment not issued and releases the rest.
//
// Nothing on the GPU waits for work issued after it, so lanes and streams
// that share a hardware queue (CUDA_DEVICE_MAX_CONNECTIONS) only serialize.
// Host buffers with a stream are one segment without copies. With
// RR_GPU_REDUCE=device, an allreduce's received chunks are reduced on the GPU
// by a server kernel per segment, issued in step 3 with the copies
// (kernels/reduce_server.hpp), instead of on the host.
//
// NULL is the legacy default stream, as in NCCL; the engine's own streams are
// non-blocking. The communicator is bound to the device current at its first
// stream-ordered call.

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "comm/staged_collectives.hpp"
#include "common/status.hpp"
#include "memory/cuda_copy_engine.hpp"
#include "memory/cuda_handles.hpp"

namespace rr {

class Communicator;

class StreamOrder {
 public:
  // Makes the call's plan (StagedCollectives' plans, or host_call).
  using MakePlan = std::function<StagedCollectives::Plan(const StagedCollectives& staged)>;

  // Binds to `device`: the staging streams, slots and counters are made
  // there. `device` < 0: the calling thread's current device.
  static Status create(Communicator* comm, int device, std::unique_ptr<StreamOrder>* out);
  // Waits for the engine's lanes (only the copies of calls that ran), unless
  // a call gave up on its stream's earlier work (abort): then it leaves the
  // staging memory allocated rather than wait for that work.
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  int device() const { return device_; }

  // Waits on the host until a submitted call's copies ran, then returns its
  // host half's outcome (the Async forms' request, on the communicator's
  // queue after that host half); ends early, failed, at an abort or a
  // revocation.
  using UntilDone = std::function<Status()>;

  // Orders the call on `stream` (steps 1-4 above); `call` names it in
  // errors. Not ok when the call could not be ordered: then its host half
  // does not run, or stops where the issue failed (and the failure is the
  // communicator's async error too), or, when only step 4 failed, later
  // work on the stream is not ordered after the call. With `until_done`, a
  // call that moves data also records events of its own on the engine's
  // copy lanes once its device half is issued and sets *until_done to wait
  // for them; then, once its host half is queued, submit() returns Ok and
  // any failure of the issue is *until_done's (and the communicator's).
  // Left empty for a call with nothing to move. `own`: the call's own
  // settings (rrCollConfig_t), its host half's; by default the
  // communicator's when it runs.
  Status submit(const char* call, void* stream, const MakePlan& make, UntilDone* until_done = nullptr,
                const CallSettings& own = {});

 private:
  struct CallEnd;  // an Async call's end (stream_order.cpp)
  // *until_done's wait (submit()): `issued` is the failure, if any.
  Status wait_for_end(const CallEnd& end, const Status& issued);
  StreamOrder(Communicator* comm, int device);
  Status init();

  Communicator* comm_;
  int device_;
  memory::CudaCopyEngine engine_;
  void* registered_ring_staging_ = nullptr;  // the communicator's, pinned for RR_GPU_REDUCE=device
  void* registered_slots_ = nullptr;         // the slots, registered with the transport
  std::unique_ptr<StagedCollectives> staged_;
  memory::CudaEvent ready_;  // step 1, recorded again at every call
  memory::CudaEvent done_[2];  // step 4, [Lane]
  std::mutex submit_mutex_;  // calls are issued in queue order
  std::atomic<bool> gave_up_{false};
};

}  // namespace rr
