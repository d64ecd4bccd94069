// The recording stand-in for the CUDA seam (device_seam.hpp): what the unit
// tests put in the device path's place on a machine without a GPU.

#include <ATen/core/jit_type.h>

#include <mutex>
#include <string>
#include <utility>

#include "device_seam.hpp"

namespace ringreduce_torch {

namespace {

// The stream tokens: any non-null address stands for a stream.
int fake_current_stream;
int fake_side_stream;

}  // namespace

void FakeDeviceSeam::note(std::string what) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.push_back(std::move(what));
}

void* FakeDeviceSeam::current_stream(c10::Device) {
  note("current_stream");
  return &fake_current_stream;
}

void* FakeDeviceSeam::side_stream(c10::Device) {
  note("side_stream");
  return &fake_side_stream;
}

void FakeDeviceSeam::run_on(c10::Device, void*, const std::function<void()>& fn) {
  note("run_on");
  fn();
}

bool FakeDeviceSeam::capturing(void*) {
  note("capturing");
  std::lock_guard<std::mutex> lock(mutex_);
  return capturing_;
}

void FakeDeviceSeam::record_stream(const at::Tensor&, void*) { note("record_stream"); }

rrResult_t FakeDeviceSeam::enqueue(c10::Device, void*, const std::function<rrResult_t(void* stream)>& call) {
  note("enqueue");
  return call(nullptr);
}

DeviceSeam::Event FakeDeviceSeam::record_event(c10::Device, void*) {
  note("record_event");
  return std::make_shared<int>(0);
}

void FakeDeviceSeam::stream_wait(void*, const Event&) { note("stream_wait"); }

bool FakeDeviceSeam::reached(const Event&) {
  note("reached");
  std::lock_guard<std::mutex> lock(mutex_);
  return reached_;
}

c10::intrusive_ptr<c10::ivalue::Future> FakeDeviceSeam::completed_future(c10::Device,
                                                                         const std::vector<at::Tensor>& outputs) {
  note("completed_future");
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(outputs));
  return future;
}

void FakeDeviceSeam::set_capturing(bool capturing) {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = capturing;
}

void FakeDeviceSeam::set_reached(bool reached) {
  std::lock_guard<std::mutex> lock(mutex_);
  reached_ = reached;
}

std::vector<std::string> FakeDeviceSeam::take_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(trace_, {});
}

}  // namespace ringreduce_torch
