// ProcessGroupRingreduce's device path, the parts that are not templates
// (process_group.hpp's device_collective is): which calls take it, the
// failure its Works report, torch's eager connect, and the tests' fake seam.

#include <string>
#include <utility>

#include "errors.hpp"
#include "process_group.hpp"

namespace ringreduce_torch {

std::optional<c10::Device> ProcessGroupRingreduce::device_of(const char* op_name,
                                                             const std::vector<at::Tensor>& tensors) const {
  std::optional<c10::Device> device;
  const at::Tensor* host = nullptr;
  for (const at::Tensor& t : tensors) {
    if (!t.is_cuda()) {
      host = &t;
      continue;
    }
    if (device && *device != t.device()) {
      throw invalid_argument(op_name, "its tensors are on " + device->str() + " and " + t.device().str() +
                                          ": one call takes tensors on one device");
    }
    device = t.device();
  }
  if (device && host) {
    throw invalid_argument(op_name, "it mixes tensors on " + device->str() + " with tensors on " +
                                        host->device().str() + ": one call takes tensors on one device");
  }
  if (!device && fake_device_ && !tensors.empty()) return tensors.front().device();
  return device;
}

DeviceWork::Failure ProcessGroupRingreduce::device_failure(const char* op_name) {
  c10::weak_intrusive_ptr<ProcessGroupRingreduce> weak(
      c10::intrusive_ptr<ProcessGroupRingreduce>::unsafe_reclaim_from_nonowning(this));
  return [weak, op_name]() -> std::exception_ptr {
    const c10::intrusive_ptr<ProcessGroupRingreduce> group = weak.lock();
    if (!group) return nullptr;  // the Work outlived its group: what it saw last stands
    try {
      const rrResult_t error = group->async_error();
      if (error == rrSuccess) return nullptr;
      return std::make_exception_ptr(Error(error, std::string("ringreduce ") + op_name +
                                                      " (ordered on a CUDA stream): " + group->last_error()));
    } catch (...) {
      return std::current_exception();
    }
  };
}

void ProcessGroupRingreduce::eagerConnectSingleDevice(at::Device device) {
  static constexpr const char* kOp = "eager_connect_single_device";
  if (!device.is_cuda() || !seam_) return;  // a CPU device: the communicator is connected already
  std::unique_lock<std::mutex> lock = lock_issue();
  check_open(kOp);
  void* stream = seam_->current_stream(device);
  check_result(seam_->enqueue(device, stream, [&](void* on) { return rrBarrier(comm_, on); }), kOp);
  ++sequence_;
}

void ProcessGroupRingreduce::use_fake_device_seam(std::shared_ptr<DeviceSeam> seam) {
  std::unique_lock<std::mutex> lock = lock_issue();
  seam_ = std::move(seam);
  fake_device_ = true;
}

}  // namespace ringreduce_torch
