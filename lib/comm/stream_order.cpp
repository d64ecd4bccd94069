#include "comm/stream_order.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "comm/communicator.hpp"
#include "kernels/reduce_server.hpp"

namespace rr {

StreamOrder::StreamOrder(Communicator* comm, int device) : comm_(comm), device_(device) {}

Status StreamOrder::create(Communicator* comm, int device, std::unique_ptr<StreamOrder>* out) {
  if (device < 0) {
    RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&device), "cudaGetDevice (the stream's device)"));
  }
  // Made on `device`, on a thread whose current device is the caller's to
  // keep: the calling thread, or the queue's. A thread with no context yet
  // (the queue's, before its first CUDA call) reports device 0 without
  // having one; setting that back would make a context on GPU 0 for nothing.
  int current = 0;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&current), "cudaGetDevice"));
  CUresult (*get_current)(CUcontext*) = nullptr;
  CUcontext had = nullptr;
  const bool knows = memory::driver_entry("cuCtxGetCurrent", &get_current) && get_current(&had) == CUDA_SUCCESS;
  const bool restore = current != device && (!knows || had != nullptr);
  std::unique_ptr<StreamOrder> order(new StreamOrder(comm, device));
  Status made = order->init();
  if (!made.ok() && order->registered_slots_) comm->transport().deregister_memory(order->registered_slots_);
  const cudaError_t restored = restore ? cudaSetDevice(current) : cudaSuccess;
  RR_RETURN_IF_ERROR(made);
  RR_RETURN_IF_ERROR(memory::cuda_status(restored, "cudaSetDevice(" + std::to_string(current) + ") (restoring it)"));
  *out = std::move(order);
  return Status::Ok();
}

Status StreamOrder::init() {
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")"));
  RR_RETURN_IF_ERROR(engine_.init());
  staged_ = std::make_unique<StagedCollectives>(comm_, &engine_, comm_->settings().gpu_segment_bytes);
  RR_RETURN_IF_ERROR(staged_->init());
  // Only ordering: no timing, and nothing on the host waits for them.
  RR_RETURN_IF_ERROR(ready_.create(/*blocking=*/false, "the stream-ordered call's input event"));
  for (memory::CudaEvent& done : done_) {
    RR_RETURN_IF_ERROR(done.create(/*blocking=*/false, "the stream-ordered call's result event"));
  }
  if (comm_->size() > 1) {
    // The ring sends from and receives into the slots: register them once
    // (the transport drops the registration when it goes, which is before
    // this; create() drops it when the rest of init() fails).
    RR_RETURN_IF_ERROR(comm_->transport().register_memory(engine_.pinned(), engine_.pinned_bytes()));
    registered_slots_ = engine_.pinned();
  }
  if (comm_->settings().gpu_reduce_on_device && comm_->size() > 1 && comm_->pool().bytes() > 0) {
    // The servers' kernels read the chunks the ring received where they
    // landed, through host pointers: pin and map the ring's staging (the
    // slots are already), on a GPU that takes host pointers in kernels.
    int host_pointers = 0;
    RR_RETURN_IF_ERROR(memory::cuda_status(
        cudaDeviceGetAttribute(&host_pointers, cudaDevAttrCanUseHostPointerForRegisteredMem, device_),
        "cudaDeviceGetAttribute(cudaDevAttrCanUseHostPointerForRegisteredMem)"));
    if (host_pointers == 0) {
      return InvalidArgument("RR_GPU_REDUCE=device: GPU " + std::to_string(device_) +
                             " cannot use host pointers to registered memory in kernels; use RR_GPU_REDUCE=host");
    }
    void* ring_staging = comm_->pool().data();
    RR_RETURN_IF_ERROR(memory::cuda_status(
        cudaHostRegister(ring_staging, comm_->pool().bytes(), cudaHostRegisterMapped | cudaHostRegisterPortable),
        "cudaHostRegister of the ring's " + std::to_string(comm_->pool().bytes()) + " bytes of staging "
        "(RR_GPU_REDUCE=device)"));
    registered_ring_staging_ = ring_staging;
    RR_RETURN_IF_ERROR(kernels::preload_reduce_servers());
    staged_->set_device_reductions(true, comm_->settings().timeout_ms);
  }
  return Status::Ok();
}

StreamOrder::~StreamOrder() {
  // The engine's streams and memory are the device's: tear down there.
  int current = -1;
  const bool switched = cudaGetDevice(&current) == cudaSuccess && current != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  if (gave_up_) engine_.abandon();
  engine_.finish();
  // No reduction runs any more: finish() waited for the servers, or (when
  // abandoned) they were ended with no reduction posted, which is all that
  // makes one touch the ring's staging; after a failed reduction a late
  // server may still write there, so it stays pinned.
  if (registered_ring_staging_ && !engine_.poisoned()) cudaHostUnregister(registered_ring_staging_);
  if (switched) cudaSetDevice(current);
  (void)cudaGetLastError();
}

// What an Async call's request waits for: its own events on the engine's two
// copy lanes (recorded once its device half is issued: nothing issued later
// on them, nor anyone's work on other streams, is waited for), then its host
// half's outcome.
struct StreamOrder::CallEnd {
  memory::CudaEvent done[2];  // [Lane]: kToDevice, kToHost
  Status recorded;            // the records' failure, if any (written at the issue)
  Status host;                // written on the queue by the host half, read there after it
};

Status StreamOrder::wait_for_end(const CallEnd& end, const Status& issued) {
  if (!issued.ok()) return issued;
  // Polled, not cudaEventSynchronize: the wait runs on the communicator's
  // queue, and an abort or a revocation (which gives up on the stream's
  // earlier work) must end it.
  auto backoff = std::chrono::microseconds(2);
  for (const memory::CudaEvent& done : end.done) {
    for (;;) {
      const cudaError_t state = cudaEventQuery(done.get());
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) {
        const Status failure = memory::cuda_status(state, "cudaEventQuery (the Async call's end)");
        comm_->report_async_failure(failure);
        return failure;
      }
      if (comm_->aborting() || comm_->revoke_requested()) {
        return Status(comm_->aborting() ? Code::kInvalidUsage : Code::kRevoked,
                      comm_->aborting() ? "the communicator was aborted while the call's copies were in flight"
                                        : "the communicator was revoked while the call's copies were in flight");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::microseconds(1000));
    }
  }
  return end.host;
}

Status StreamOrder::submit(const char* call, void* stream, const MakePlan& make, UntilDone* until_done,
                           const CallSettings& own) {
  auto caller_stream = static_cast<cudaStream_t>(stream);
  auto failed = [call](const Status& s) { return Status(s.code(), std::string(call) + ": " + s.message()); };
  // The events and kernels are made on the current device: it must be the
  // stream's, and so this communicator's.
  int current = 0;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&current), std::string(call) + ": cudaGetDevice"));
  if (current != device_) {
    return InvalidUsage(std::string(call) + ": the current device is " + std::to_string(current) +
                        ", but this communicator's stream-ordered calls use device " + std::to_string(device_) +
                        " (call cudaSetDevice(" + std::to_string(device_) + ") first)");
  }
  // A captured call would replay as copies and counter kernels with stale
  // counts and no host half: refuse capture.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaStreamIsCapturing(caller_stream, &capture),
                                         std::string(call) + ": cudaStreamIsCapturing"));
  if (capture != cudaStreamCaptureStatusNone) {
    return InvalidUsage(std::string(call) +
                        ": the stream is being captured into a CUDA graph; ringreduce's stream-ordered calls "
                        "cannot be captured (call it outside the capture)");
  }
  // Calls take their counts in the order the queue runs their host halves.
  std::lock_guard<std::mutex> lock(submit_mutex_);
  auto plan = std::make_shared<const StagedCollectives::Plan>(make(*staged_));
  if (plan->segments == 0) return Status::Ok();  // count 0: nothing to move or order
  std::shared_ptr<CallEnd> end;
  if (until_done) {
    end = std::make_shared<CallEnd>();
    for (memory::CudaEvent& done : end->done) {
      const Status made = done.create(/*blocking=*/false, "the Async call's end");
      if (!made.ok()) return failed(made);
    }
  }
  // 1. The inputs are ready when the caller's stream reaches this point:
  // every staging lane waits for it (the copies back too, not only through
  // the host's releases; the reduction servers, which before it would only
  // poll).
  Status ready = memory::cuda_status(cudaEventRecord(ready_.get(), caller_stream), "cudaEventRecord on the stream");
  for (memory::Lane lane : {memory::Lane::kToHost, memory::Lane::kToDevice, memory::Lane::kReduce}) {
    if (ready.ok()) {
      ready = memory::cuda_status(cudaStreamWaitEvent(engine_.stream(lane), ready_.get(), 0),
                                  "cudaStreamWaitEvent (a staging stream after the caller's)");
    }
  }
  if (!ready.ok()) return failed(ready);
  // 2. The host half first, in program order with the communicator's other
  // calls: issuing blocks once a stream's launch queue is full, until the
  // GPU drained it, and that takes this host half's releases. 3. The
  // device half (StagedCollectives::submit).
  StagedCollectives::Submission submission;
  submission.call = own;
  submission.enter = [this] {
    return memory::cuda_status(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  };
  // The stream's earlier work may take long (or wait on another
  // communicator): an abort does not wait for it, nor a revocation here
  // (rrCommRevoke; a peer's is heard by the segment's collective, which
  // needs the segment first, and by the calls after).
  submission.give_up = [this] {
    if (!comm_->aborting() && !comm_->revoke_requested()) return false;
    gave_up_ = true;
    return true;
  };
  // 4. Later work on the caller's stream waits for the copies back, and for
  // every read of its buffers; also after a failed issue, whose copies may
  // still run.
  submission.after_issue = [&] {
    Status ordered;
    for (memory::Lane lane : {memory::Lane::kToDevice, memory::Lane::kToHost}) {
      if (end && end->recorded.ok()) {
        // The Async call's own end, on the lane itself.
        end->recorded = memory::cuda_status(
            cudaEventRecord(end->done[static_cast<int>(lane)].get(), engine_.stream(lane)),
            "cudaEventRecord (the Async call's end)");
      }
      cudaEvent_t done = done_[static_cast<int>(lane)].get();
      if (ordered.ok()) {
        ordered =
            memory::cuda_status(cudaEventRecord(done, engine_.stream(lane)), "cudaEventRecord on a staging stream");
      }
      if (ordered.ok()) {
        ordered = memory::cuda_status(cudaStreamWaitEvent(caller_stream, done, 0),
                                      "cudaStreamWaitEvent (the stream after the call)");
      }
    }
    return ordered;
  };
  // A failed host half is the communicator's async error. After a failed
  // issue that failure is the cause (the call returned it too): this rank
  // did not run the whole call, its peers did, so the communicator must not
  // go on as if it had (a CUDA error breaks it).
  submission.failed = [this, call, end, segments = plan->segments](const Status& cause, uint64_t first) {
    // A wait given up for a revocation is the revocation.
    const bool revoked = gave_up_ && !comm_->aborting() && comm_->revoke_requested();
    Status failure(revoked ? Code::kRevoked : cause.code(),
                   std::string(call) + " (stream-ordered, segments " + std::to_string(first) + ".." +
                       std::to_string(first + segments - 1) + "): " +
                       (revoked ? "the communicator was revoked (rrCommRevoke) while the call "
                                  "waited for its stream's earlier work: "
                                : "") +
                       cause.message());
    if (end) end->host = failure;
    comm_->report_async_failure(failure);
  };
  bool refused = false;
  Status submitted = staged_->submit(comm_->queue(), plan, std::move(submission), &refused);
  // A refused call: the queue is closing. The counts of earlier calls are
  // released at destroy (not here: they may still be running), which then
  // does not wait for the stream work before them.
  if (refused) gave_up_ = true;
  if (end && !refused) {
    // The host half is queued: the call runs, so the caller gets its
    // request whatever failed here (an issue that failed broke the
    // communicator, and the request says so too).
    const Status issued = submitted.ok() ? end->recorded : failed(submitted);
    if (!end->recorded.ok()) comm_->report_async_failure(failed(end->recorded));
    *until_done = [this, end, issued] { return wait_for_end(*end, issued); };
    return Status::Ok();
  }
  return submitted.ok() ? submitted : failed(submitted);
}

}  // namespace rr
