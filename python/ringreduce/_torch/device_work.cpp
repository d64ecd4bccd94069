#include "device_work.hpp"

#include <string>
#include <thread>
#include <utility>

#include "errors.hpp"

namespace ringreduce_torch {

DeviceWork::DeviceWork(int rank, c10d::OpType type, const char* op_name, const char* profile,
                       const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                       std::vector<at::Tensor> keep_alive, c10::Device device, std::shared_ptr<DeviceSeam> seam,
                       DeviceSeam::Event event, c10::intrusive_ptr<c10::ivalue::Future> future, Failure failure)
    : c10d::Work(rank, type, profile, inputs),
      op_name_(op_name),
      outputs_(std::move(outputs)),
      device_(device),
      seam_(std::move(seam)),
      event_(std::move(event)),
      future_(std::move(future)),
      failure_(std::move(failure)),
      keep_alive_(std::move(keep_alive)) {}

bool DeviceWork::isCompleted() {
  if (ended_ok_.load(std::memory_order_acquire)) return true;
  const bool reached = seam_->reached(event_);
  const std::exception_ptr failed = failure_();
  if (!reached && !failed) return false;
  if (!failed) ended_ok_.store(true, std::memory_order_release);
  end_once(failed);
  return true;
}

void DeviceWork::end_once(const std::exception_ptr& failed) {
  std::lock_guard<std::mutex> lock(keep_mutex_);
  if (ended_) return;
  ended_ = true;
  // The GPU passed the event (or the communicator broke): the engine holds
  // the tensors no more; torch's profiler range of the call ends here.
  if (!failed) keep_alive_.clear();
  finish(failed);
}

bool DeviceWork::isSuccess() const {
  if (ended_ok_.load(std::memory_order_acquire)) return true;
  if (!seam_->reached(event_) || failure_()) return false;
  ended_ok_.store(true, std::memory_order_release);
  return true;
}

std::exception_ptr DeviceWork::exception() const { return ended_ok_.load() ? nullptr : failure_(); }

void DeviceWork::synchronize() { seam_->stream_wait(seam_->current_stream(device_), event_); }

bool DeviceWork::wait(std::chrono::milliseconds timeout) {
  synchronize();
  if (timeout != kNoTimeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!isCompleted()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        throw Error(rrTimeout, std::string("ringreduce ") + op_name_ + ": Work.wait(timeout=" +
                                   std::to_string(timeout.count()) +
                                   " ms) expired before the GPU reached the operation's end on its stream");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  if (std::exception_ptr failed = exception()) std::rethrow_exception(failed);
  return true;
}

}  // namespace ringreduce_torch
