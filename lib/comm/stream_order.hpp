#pragma once
// Stream-ordered calls (CUDA build), as NCCL's: a call with device buffers,
// or with a stream, returns at once; it runs after the work enqueued on the
// caller's stream before it, and work enqueued after it sees its result.
//
// At the call, on the calling thread:
//   1. record an event on the caller's stream (the inputs are ready);
//   2. enqueue there a one-thread kernel that waits until the communicator's
//      flag (pinned host memory mapped into the device) reaches this call's
//      sequence number (kernels/stream_wait.hpp);
//   3. queue the operation on the communicator's queue, so it runs in
//      program order with the communicator's other calls.
// On the queue's thread, the operation waits for the event, runs (through
// the staging pipeline for device buffers, or the host collective for host
// ones), and then writes its sequence number into the flag: after its copies
// back have landed, and also when it failed, so the stream never hangs. A
// failure is the communicator's async error (rrCommGetAsyncError).
//
// NULL with device buffers is the legacy default stream, as in NCCL; the
// engine's own streams are non-blocking, so they never queue behind the
// wait kernel there. The communicator is bound to the device current at its
// first stream-ordered call.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/staged_collectives.hpp"
#include "common/status.hpp"
#include "memory/cuda_copy_engine.hpp"
#include "memory/cuda_handles.hpp"

namespace rr {

class Communicator;

class StreamOrder {
 public:
  // An operation: `staged` runs collectives on device buffers.
  using Body = std::function<Status(StagedCollectives& staged)>;

  // Binds to `device`: the staging streams, slots and flag are made there.
  // `device` < 0: the calling thread's current device.
  static Status create(Communicator* comm, int device, std::unique_ptr<StreamOrder>* out);
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  int device() const { return device_; }

  // Orders `body` on `stream` (steps 1-3 above); `call` names it in errors.
  // Not ok only when nothing was enqueued (the stream is untouched then too,
  // but for an event record).
  Status submit(const char* call, void* stream, Body body);

 private:
  StreamOrder(Communicator* comm, int device);
  Status init();
  // Runs on the queue's thread: waits for `ready`, runs `body`, releases the flag.
  Status run(const char* call, uint64_t sequence, cudaEvent_t ready, const Body& body);
  // The flag reaches `sequence` (never goes back).
  void release(uint64_t sequence);
  // Events for step 1, reused.
  Status take_event(cudaEvent_t* event);
  void give_event(cudaEvent_t event);

  Communicator* comm_;
  int device_;
  bool one_hardware_queue_ = false;  // CUDA_DEVICE_MAX_CONNECTIONS=1
  memory::CudaCopyEngine engine_;
  std::unique_ptr<StagedCollectives> staged_;
  memory::MappedHostMemory flag_;  // one uint64_t: the last sequence number done
  std::mutex submit_mutex_;  // sequence numbers are handed out in queue order
  uint64_t issued_ = 0;
  std::mutex events_mutex_;
  std::vector<memory::CudaEvent> events_;  // every event made
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace rr
