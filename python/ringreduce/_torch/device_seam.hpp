#pragma once
// Every CUDA call the backend's device path makes, behind one interface: the
// CUDA build's (cuda_seam.cpp, over torch's own CUDA streams, events and
// caching allocator) and a recording fake (fake_seam.cpp) that the unit tests
// put in its place on a machine without a GPU, to check for each operation
// which calls it makes and in what order.
//
// A collective on CUDA tensors (process_group.hpp, device_collective) makes
// them in this order, on the caller's thread, without waiting for the GPU,
// as ProcessGroupNCCL orders its calls on a stream of its own:
//   current_stream   torch's current stream on the tensors' device;
//   capturing        refused under CUDA graph capture, by name;
//   side_stream      the group's stream on that device (made once);
//   record_event     on the current stream: the inputs are ready there;
//   stream_wait      the side stream waits for them;
//   record_stream    each tensor the engine reads or writes, for the side
//                    stream (freed earlier on its own stream, its memory is
//                    not reused before the side stream reached this point);
//   enqueue          the engine's stream-ordered call on the side stream;
//   run_on           with the side stream current: the copies back into
//                    non-contiguous tensors, then
//     record_event     the Work's event, and
//     completed_future the Work's future, device-aware (its events on the
//                      side stream).
// The current stream goes on at once (async_op overlaps the call with what
// the caller enqueues next); Work.wait() / synchronize(): current_stream,
// then stream_wait on the Work's event.

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

class DeviceSeam {
 public:
  // An event recorded on a stream; the seam's own (a cudaEvent_t for the
  // CUDA one), destroyed with the last reference.
  using Event = std::shared_ptr<void>;

  virtual ~DeviceSeam() = default;

  // torch's current stream on `device` (c10::cuda::getCurrentCUDAStream).
  virtual void* current_stream(c10::Device device) = 0;
  // A stream of torch's pool on `device` (c10::cuda::getStreamFromPool),
  // for a group's calls there.
  virtual void* side_stream(c10::Device device) = 0;
  // Runs `fn` with `stream` current on `device` (c10::cuda::CUDAStreamGuard):
  // the tensor copies it enqueues go on that stream.
  virtual void run_on(c10::Device device, void* stream, const std::function<void()>& fn) = 0;
  // True while `stream` is being captured into a CUDA graph
  // (cudaStreamIsCapturing).
  virtual bool capturing(void* stream) = 0;
  // Tells torch's caching allocator that `stream` uses `tensor`'s memory
  // (c10::cuda::CUDACachingAllocator::recordStream): freed before the
  // stream's work reached this point, its block is not handed out again
  // until then. A no-op for the stream the tensor was allocated on.
  virtual void record_stream(const at::Tensor& tensor, void* stream) = 0;
  // Makes the engine call `call` on `stream`, with `device` current (the
  // engine orders a call on the current device's stream; the fake runs it
  // blocking, as a host call with no stream).
  virtual rrResult_t enqueue(c10::Device device, void* stream, const std::function<rrResult_t(void* stream)>& call) = 0;
  // An event on `stream` at this point of it (cudaEventRecord).
  virtual Event record_event(c10::Device device, void* stream) = 0;
  // Makes `stream` wait for `event` (cudaStreamWaitEvent): no host wait.
  virtual void stream_wait(void* stream, const Event& event) = 0;
  // True once the GPU passed `event` (cudaEventQuery).
  virtual bool reached(const Event& event) = 0;
  // A future completed with `outputs` whose callbacks and waiters are
  // ordered after the current stream's work on `device` (torch's
  // ivalue::Future with the device: DDP's communication hooks chain on it).
  virtual c10::intrusive_ptr<c10::ivalue::Future> completed_future(c10::Device device,
                                                                  const std::vector<at::Tensor>& outputs) = 0;
};

// The CUDA build's seam (one per process), or nullptr in a build without
// CUDA support.
std::shared_ptr<DeviceSeam> cuda_seam();

// The recording fake: every call appends its name to trace(), streams and
// events are tokens, enqueue runs the call blocking with no stream (host
// tensors stand in for device ones), and capturing() and reached() answer
// what set_capturing() and set_reached() said.
class FakeDeviceSeam : public DeviceSeam {
 public:
  void* current_stream(c10::Device device) override;
  void* side_stream(c10::Device device) override;
  void run_on(c10::Device device, void* stream, const std::function<void()>& fn) override;
  bool capturing(void* stream) override;
  void record_stream(const at::Tensor& tensor, void* stream) override;
  rrResult_t enqueue(c10::Device device, void* stream, const std::function<rrResult_t(void* stream)>& call) override;
  Event record_event(c10::Device device, void* stream) override;
  void stream_wait(void* stream, const Event& event) override;
  bool reached(const Event& event) override;
  c10::intrusive_ptr<c10::ivalue::Future> completed_future(c10::Device device,
                                                          const std::vector<at::Tensor>& outputs) override;

  void set_capturing(bool capturing);
  void set_reached(bool reached);
  // The calls so far, and forgets them.
  std::vector<std::string> take_trace();

 private:
  void note(std::string what);

  std::mutex mutex_;
  std::vector<std::string> trace_;
  bool capturing_ = false;
  bool reached_ = true;
};

}  // namespace ringreduce_torch
