// ProcessGroupRingreduce's device path, the parts that are not templates
// (process_group.hpp's device_collective is): which calls take it, the
// failure its Works report, torch's eager connect, and the tests' fake seam.

#include <string>
#include <utility>

#include "errors.hpp"
#include "process_group.hpp"

namespace ringreduce_torch {

std::optional<c10::Device> ProcessGroupRingreduce::device_of(
    const char* op_name, std::initializer_list<const std::vector<at::Tensor>*> lists) const {
  std::optional<c10::Device> device;
  const at::Tensor* host = nullptr;
  const at::Tensor* any = nullptr;
  for (const std::vector<at::Tensor>* list : lists) {
    for (const at::Tensor& t : *list) {
      if (!t.defined()) continue;
      any = &t;
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
  }
  if (device && host) {
    throw invalid_argument(op_name, "it mixes tensors on " + device->str() + " with tensors on " +
                                        host->device().str() + ": one call takes tensors on one device");
  }
  if (!device && fake_device_ && any) return any->device();
  return device;
}

void* ProcessGroupRingreduce::side_stream_locked(c10::Device device) {
  auto [it, made] = side_streams_.try_emplace(device.index(), nullptr);
  if (made) it->second = seam_->side_stream(device);
  return it->second;
}

DeviceWork::Failure ProcessGroupRingreduce::device_failure(const char* op_name) {
  c10::weak_intrusive_ptr<ProcessGroupRingreduce> weak(
      c10::intrusive_ptr<ProcessGroupRingreduce>::unsafe_reclaim_from_nonowning(this));
  return [weak, op_name]() -> std::exception_ptr {
    const c10::intrusive_ptr<ProcessGroupRingreduce> group = weak.lock();
    if (!group) return nullptr;  // the Work outlived its group: what it saw last stands
    try {
      const std::optional<std::pair<rrResult_t, std::string>> failed = group->stream_failure();
      if (!failed) return nullptr;
      return std::make_exception_ptr(Error(failed->first, std::string("ringreduce ") + op_name +
                                                              " (ordered on a CUDA stream): " + failed->second));
    } catch (...) {
      return std::current_exception();
    }
  };
}

std::optional<std::pair<rrResult_t, std::string>> ProcessGroupRingreduce::stream_failure() {
  // Never waits: a split, shrink or agreement holds the issue lock across
  // engine calls, and a Work's is_completed() must not wait for them.
  std::unique_lock<std::mutex> lock(issue_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  if (state_ == State::kAborted) return std::make_pair(rrInvalidUsage, std::string("the process group was aborted"));
  // Shut down in order: the communicator ran its stream-ordered calls to
  // their end first (rrCommDestroy); a reconfigured group's is a new one.
  if (state_ != State::kOpen) return std::nullopt;
  rrResult_t error = rrSuccess;
  if (rrCommGetAsyncError(comm_, &error) != rrSuccess || error == rrSuccess) return std::nullopt;
  return std::make_pair(error, std::string(rrGetLastError(comm_)));
}

void ProcessGroupRingreduce::eagerConnectSingleDevice(at::Device device) {
  static constexpr const char* kOp = "eager_connect_single_device";
  std::unique_lock<std::mutex> lock = lock_issue();
  if (!device.is_cuda() || !seam_) return;  // a CPU device: the communicator is connected already
  check_open(kOp);
  // On the group's own stream there (never NULL, which would make the
  // barrier a host call): the communicator binds to the device and sets its
  // staging up now.
  void* side = side_stream_locked(device);
  check_result(seam_->enqueue(device, side, [&](void* on) { return rrBarrier(comm_, on); }), kOp);
  ++sequence_;
}

void ProcessGroupRingreduce::use_fake_device_seam(std::shared_ptr<DeviceSeam> seam) {
  std::unique_lock<std::mutex> lock = lock_issue();
  seam_ = std::move(seam);
  fake_device_ = true;
}

}  // namespace ringreduce_torch
