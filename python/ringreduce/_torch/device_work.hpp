#pragma once
// The Work of a collective on CUDA tensors (process_group.hpp's
// device_collective): the engine call is ordered on the group's stream,
// after torch's current one, and the Work holds a CUDA event recorded after
// it there, as ProcessGroupNCCL's does. Nothing here waits on the host unless asked to: wait() and
// synchronize() make the caller's current stream wait for the event; a
// wait() with a timeout also waits on the host until the GPU passed the
// event (as NCCL's), or throws naming the operation. The future is
// device-aware and completed at the issue on the group's stream, so DDP's
// communication hooks chain on it.
//
// A stream-ordered call fails asynchronously (rrCommGetAsyncError): the Work
// reads as completed and failed once its communicator broke, with the
// communicator's error, and wait() throws it.

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "device_seam.hpp"

namespace ringreduce_torch {

class DeviceWork : public c10d::Work {
 public:
  // The communicator's failure as an exception, or nullptr while healthy.
  using Failure = std::function<std::exception_ptr()>;

  // `outputs`: result(). `keep_alive`: every tensor the engine reads or
  // writes, held until the GPU passed `event` (the caching allocator knows
  // of the stream too: record_stream). `future`: the seam's completed one.
  DeviceWork(int rank, c10d::OpType type, const char* op_name, const char* profile,
             const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep_alive, c10::Device device, std::shared_ptr<DeviceSeam> seam,
             DeviceSeam::Event event, c10::intrusive_ptr<c10::ivalue::Future> future, Failure failure);

  // The GPU passed the event, or the communicator broke. Once it passed with
  // the communicator healthy the Work stays a success (a later shutdown or
  // failure is not its own).
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // The current stream on the tensors' device waits for the event.
  void synchronize() override;
  // synchronize(); with a timeout, then waits on the host until the GPU
  // passed the event, throwing once `timeout` expired. Throws the
  // communicator's failure.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  const char* op_name_;
  const std::vector<at::Tensor> outputs_;
  const c10::Device device_;
  const std::shared_ptr<DeviceSeam> seam_;
  const DeviceSeam::Event event_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  const Failure failure_;
  mutable std::atomic<bool> ended_ok_{false};  // the GPU passed the event with the communicator healthy
  // Once the Work's end is first seen: keep_alive_ dropped (on success) and
  // c10d::Work::finish() called (torch's profiler range ends).
  void end_once(const std::exception_ptr& failed);

  std::mutex keep_mutex_;
  bool ended_ = false;                  // end_once ran
  std::vector<at::Tensor> keep_alive_;  // dropped once the GPU passed the event
};

}  // namespace ringreduce_torch
