#include "comm/stream_order.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "comm/communicator.hpp"
#include "kernels/stream_wait.hpp"

namespace rr {

StreamOrder::StreamOrder(Communicator* comm, int device) : comm_(comm), device_(device) {
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  one_hardware_queue_ = connections != nullptr && std::strcmp(connections, "1") == 0;
}

Status StreamOrder::create(Communicator* comm, int device, std::unique_ptr<StreamOrder>* out) {
  if (device < 0) {
    RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&device), "cudaGetDevice (the stream's device)"));
  }
  // Made on `device`, on a thread whose current device is the caller's to keep.
  int current = 0;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&current), "cudaGetDevice"));
  std::unique_ptr<StreamOrder> order(new StreamOrder(comm, device));
  Status made = order->init();
  const cudaError_t restored = cudaSetDevice(current);
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
  if (comm_->size() > 1) {
    // The ring sends from and receives into the slots: register them once.
    RR_RETURN_IF_ERROR(comm_->transport().register_memory(engine_.pinned(), engine_.pinned_bytes()));
  }
  RR_RETURN_IF_ERROR(flag_.allocate(sizeof(uint64_t), "the stream-ordering flag"));
  __atomic_store_n(static_cast<uint64_t*>(flag_.host()), uint64_t{0}, __ATOMIC_RELEASE);
  return Status::Ok();
}

StreamOrder::~StreamOrder() {
  // Every wait kernel may go (the queue ran every operation before this).
  // One may still be queued behind other work on its stream, and must find
  // the flag there when it runs: the flag (one mapped pinned page) is left
  // allocated rather than waited for. Waiting would mean the whole device
  // (cudaDeviceSynchronize), that is every other communicator's wait kernel
  // and the user's work too, which may wait on this very thread.
  if (flag_.host()) {
    release(std::numeric_limits<uint64_t>::max());
    if (issued_ > 0) flag_.leak();
  }
}

void StreamOrder::release(uint64_t sequence) {
  auto* flag = static_cast<uint64_t*>(flag_.host());
  uint64_t seen = __atomic_load_n(flag, __ATOMIC_RELAXED);
  while (seen < sequence &&
         !__atomic_compare_exchange_n(flag, &seen, sequence, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
  }
}

Status StreamOrder::take_event(cudaEvent_t* event) {
  std::lock_guard<std::mutex> lock(events_mutex_);
  if (free_events_.empty()) {
    // The operation waits for it on the queue's thread: sleep, not spin.
    memory::CudaEvent made;
    RR_RETURN_IF_ERROR(made.create(/*blocking=*/true, "the stream-ordered call's input event"));
    free_events_.push_back(made.get());
    events_.push_back(std::move(made));
  }
  *event = free_events_.back();
  free_events_.pop_back();
  return Status::Ok();
}

void StreamOrder::give_event(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(events_mutex_);
  free_events_.push_back(event);
}

Status StreamOrder::submit(const char* call, void* stream, Body body) {
  auto caller_stream = static_cast<cudaStream_t>(stream);
  // The event and the wait kernel are made on the current device: it must be
  // the stream's, and so this communicator's.
  int current = 0;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&current), std::string(call) + ": cudaGetDevice"));
  if (current != device_) {
    return InvalidUsage(std::string(call) + ": the current device is " + std::to_string(current) +
                        ", but this communicator's stream-ordered calls use device " + std::to_string(device_) +
                        " (call cudaSetDevice(" + std::to_string(device_) + ") first)");
  }
  // A captured call would replay as a wait kernel with a stale sequence
  // number and no collective: refuse capture, as its record/wait cannot be
  // expressed in a graph.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  RR_RETURN_IF_ERROR(memory::cuda_status(cudaStreamIsCapturing(caller_stream, &capture),
                                         std::string(call) + ": cudaStreamIsCapturing"));
  if (capture != cudaStreamCaptureStatusNone) {
    return InvalidUsage(std::string(call) +
                        ": the stream is being captured into a CUDA graph; ringreduce's stream-ordered calls "
                        "cannot be captured (call it outside the capture)");
  }
  if (one_hardware_queue_) {
    return InvalidUsage(std::string(call) +
                        ": CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one hardware queue, where the "
                        "staging copies that release the stream would wait behind it; unset it (or raise it) "
                        "for ringreduce's stream-ordered calls");
  }
  cudaEvent_t ready = nullptr;
  RR_RETURN_IF_ERROR(take_event(&ready));
  // Sequence numbers in queue order: the flag only moves forward.
  std::lock_guard<std::mutex> lock(submit_mutex_);
  // 1. The inputs are ready when the caller's stream reaches this point.
  Status recorded = memory::cuda_status(cudaEventRecord(ready, caller_stream),
                                        std::string(call) + ": cudaEventRecord on the stream");
  if (!recorded.ok()) {
    give_event(ready);
    return recorded;
  }
  // 2. Later work on the stream waits for this call's result.
  const uint64_t sequence = issued_ + 1;
  Status launched = kernels::enqueue_flag_wait(static_cast<const volatile uint64_t*>(flag_.device()), sequence,
                                               stream);
  if (!launched.ok()) {
    give_event(ready);
    return Status(launched.code(), std::string(call) + ": " + launched.message());
  }
  issued_ = sequence;
  // 3. The operation, in program order with the communicator's others.
  auto started = std::make_shared<bool>(false);
  auto operation = comm_->queue().enqueue([this, call, sequence, ready, started, body = std::move(body)] {
    *started = true;
    return run(call, sequence, ready, body);
  });
  Status refused;
  if (comm_->queue().test(*operation, &refused) && !*started) {
    // The queue is closing and will never run it: free the stream anyway.
    give_event(ready);
    release(sequence);
    return Status(refused.code(), std::string(call) + ": " + refused.message());
  }
  return Status::Ok();
}

Status StreamOrder::run(const char* call, uint64_t sequence, cudaEvent_t ready, const Body& body) {
  // However this ends, the stream goes on.
  struct Release {
    StreamOrder* order;
    uint64_t sequence;
    ~Release() { order->release(sequence); }
  } release_at_end{this, sequence};
  Status status = memory::cuda_status(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  // The stream's earlier work may take long (or wait on another
  // communicator): poll, so an abort does not wait for it.
  while (status.ok()) {
    const cudaError_t state = cudaEventQuery(ready);
    if (state == cudaSuccess) break;
    if (state != cudaErrorNotReady) {
      status = memory::cuda_status(state, "waiting for the stream's earlier work (cudaEventQuery)");
    } else if (comm_->aborting()) {
      status = InvalidUsage("aborted while waiting for the stream's earlier work");
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  give_event(ready);
  if (status.ok()) status = body(*staged_);
  if (!status.ok()) {
    status = Status(status.code(), std::string(call) + " (stream-ordered, #" + std::to_string(sequence) + "): " +
                                       status.message());
    comm_->report_async_failure(status);
  }
  return status;
}

}  // namespace rr
