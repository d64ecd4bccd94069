// ProcessGroupRingreduce's operations: each checks its arguments, stages
// its tensors and issues one engine call (lifecycle.cpp makes and ends the
// group; coalesced.cpp, all_to_all.cpp, sparse_allreduce.cpp and
// monitored_barrier.cpp hold the other operations).

#include "process_group.hpp"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <utility>

#include "errors.hpp"
#include "gil.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

void ProcessGroupRingreduce::run_here(const c10::intrusive_ptr<CollectiveWork>& work) {
  struct Ended {
    ProcessGroupRingreduce* group;
    ~Ended() {
      std::lock_guard<std::mutex> lock(group->issue_mutex_);
      --group->running_here_;
    }
  } ended{this};
  std::optional<pybind11::gil_scoped_release> no_gil;
  release_gil_if_held(&no_gil);
  work->run_to_end();
}

std::unique_lock<std::mutex> ProcessGroupRingreduce::lock_issue() {
  std::unique_lock<std::mutex> lock(issue_mutex_);
  issue_resumed_.wait(lock, [&] { return !issue_paused_; });
  return lock;
}

void ProcessGroupRingreduce::check_open(const char* op_name) const {
  if (state_ == State::kUnconfigured) {
    throw Error(rrInvalidUsage, std::string("ringreduce ") + op_name +
                                    ": the process group has no communicator yet: it was made with "
                                    "enable_reconfigure=True, so dist._reconfigure(uuid, handles) makes it");
  }
  if (state_ == State::kAborted) {
    throw Error(rrInvalidUsage, std::string("ringreduce ") + op_name + ": the process group was aborted");
  }
  if (state_ == State::kShutDown) {
    throw Error(rrInvalidUsage, std::string("ringreduce ") + op_name + ": the process group was shut down");
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::broadcast(std::vector<at::Tensor>& tensors,
                                                                 const c10d::BroadcastOptions& opts) {
  static constexpr const char* kOp = "broadcast";
  check_single(kOp, tensors);
  check_rank(kOp, "root", opts.rootRank, size_);
  check_root_tensor(kOp, opts.rootTensor);
  const int root = static_cast<int>(opts.rootRank);
  Staged s = stage(tensors[0], /*copy_in=*/rank_ == root);
  const EngineType type = moved_type(s.engine);
  const rrDataType_t dtype = type.dtype;
  void* buf = s.engine.data_ptr();
  const size_t count = type.count(s.engine.numel());
  return collective(c10d::OpType::BROADCAST, opts, kOp, "ringreduce:broadcast",
                    tensors, tensors, {s.engine}, copy_back_if_needed(s),
                    [&](const EngineCall& c) {
                      return c.call(rrBroadcastConfig, rrBroadcastAsyncConfig, buf, buf, count, dtype, root);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::allreduce(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceOptions& opts) {
  static constexpr const char* kOp = "allreduce";
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == at::kSparse) {
    return sparse_allreduce(tensors, opts);
  }
  check_single(kOp, tensors);
  const EngineType type = reduced_type(kOp, tensors[0]);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, tensors[0].scalar_type());
  Staged s = stage(tensors[0], true);
  void* buf = s.engine.data_ptr();
  const size_t count = type.count(s.engine.numel());
  return collective(c10d::OpType::ALLREDUCE, opts, kOp, "ringreduce:all_reduce",
                    tensors, tensors, {s.engine}, copy_back_if_needed(s),
                    [&](const EngineCall& c) {
                      return c.call(rrAllReduceConfig, rrAllReduceAsyncConfig, buf, buf, count, dtype, op);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::reduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::ReduceOptions& opts) {
  static constexpr const char* kOp = "reduce";
  check_single(kOp, tensors);
  check_rank(kOp, "root", opts.rootRank, size_);
  check_root_tensor(kOp, opts.rootTensor);
  const int root = static_cast<int>(opts.rootRank);
  const EngineType type = reduced_type(kOp, tensors[0]);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, tensors[0].scalar_type());
  Staged s = stage(tensors[0], true);
  void* buf = s.engine.data_ptr();
  const size_t count = type.count(s.engine.numel());
  return collective(c10d::OpType::REDUCE, opts, kOp, "ringreduce:reduce",
                    tensors, tensors, {s.engine}, copy_back_if_needed(s),
                    [&](const EngineCall& c) {
                      return c.call(rrReduceConfig, rrReduceAsyncConfig, buf, buf, count, dtype, op, root);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "allgather";
  check_single(kOp, inputs);
  check_count(kOp, "the output list of lists", outputs.size(), 1);
  check_count(kOp, "the output list", outputs[0].size(), size_);
  check_like(kOp, inputs[0], outputs[0], /*same_shape=*/true);
  const EngineType type = moved_type(inputs[0]);
  const rrDataType_t dtype = type.dtype;
  Staged in = stage(inputs[0], true);
  at::Tensor flat = flat_like(outputs[0]);
  std::vector<at::Tensor> out = outputs[0];
  const void* send = in.engine.data_ptr();
  void* recv = flat.data_ptr();
  const size_t count = type.count(in.engine.numel());
  return collective(c10d::OpType::ALLGATHER, opts, kOp, "ringreduce:all_gather",
                    inputs, out, {in.engine, flat}, [flat, out] { copy_out(flat, out); },
                    [&](const EngineCall& c) {
                      return c.call(rrAllGatherConfig, rrAllGatherAsyncConfig, send, recv, count, dtype);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "_allgather_base";
  check_same_dtype(kOp, output, input);
  if (output.numel() != input.numel() * size_) {
    throw invalid_argument(kOp,
                           "output has " + std::to_string(output.numel()) +
                               " elements, expected group size x input = " + std::to_string(input.numel() * size_));
  }
  const EngineType type = moved_type(input);
  const rrDataType_t dtype = type.dtype;
  Staged in = stage(input, true);
  Staged out = stage(output, false);
  const void* send = in.engine.data_ptr();
  void* recv = out.engine.data_ptr();
  const size_t count = type.count(in.engine.numel());
  return collective(c10d::OpType::_ALLGATHER_BASE, opts, kOp, "ringreduce:all_gather_into_tensor",
                    {input}, {output}, {in.engine, out.engine},
                    copy_back_if_needed(out),
                    [&](const EngineCall& c) {
                      return c.call(rrAllGatherConfig, rrAllGatherAsyncConfig, send, recv, count, dtype);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::GatherOptions& opts) {
  static constexpr const char* kOp = "gather";
  check_single(kOp, inputs);
  check_rank(kOp, "root", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  const EngineType type = moved_type(inputs[0]);
  const rrDataType_t dtype = type.dtype;
  Staged in = stage(inputs[0], true);
  at::Tensor flat;
  std::vector<at::Tensor> out;
  std::function<void()> on_success;
  if (rank_ == root) {
    check_count(kOp, "the root's output list of lists", outputs.size(), 1);
    check_count(kOp, "the root's output list", outputs[0].size(), size_);
    check_like(kOp, inputs[0], outputs[0], /*same_shape=*/true);
    out = outputs[0];
    flat = flat_like(out);
    on_success = [flat, out] { copy_out(flat, out); };
  } else if (!outputs.empty() && !outputs[0].empty()) {
    throw invalid_argument(kOp, "output tensors are given on rank " + std::to_string(rank_) +
                                    ", which is not the root (" + std::to_string(root) + ")");
  }
  const void* send = in.engine.data_ptr();
  void* recv = flat.defined() ? flat.data_ptr() : nullptr;
  const size_t count = type.count(in.engine.numel());
  std::vector<at::Tensor> keep{in.engine};
  if (flat.defined()) keep.push_back(flat);
  return collective(c10d::OpType::GATHER, opts, kOp, "ringreduce:gather", inputs, out, keep, on_success,
                    [&](const EngineCall& c) {
                      return c.call(rrGatherConfig, rrGatherAsyncConfig, send, recv, count, dtype, root);
                    });
}

#ifdef RR_TORCH_HAS_GATHER_SINGLE
c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::gather_single(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::GatherOptions& opts) {
  static constexpr const char* kOp = "gather_single";
  check_dense(kOp, input);
  check_not_capturing(kOp, input);
  check_rank(kOp, "root", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    check_same_dtype(kOp, output, input);
    if (!output.is_contiguous()) throw invalid_argument(kOp, "the root's output tensor is not contiguous");
    if (output.numel() != input.numel() * size_) {
      throw invalid_argument(kOp, "the root's output has " + std::to_string(output.numel()) +
                                      " elements, expected group size x input = " +
                                      std::to_string(input.numel() * size_));
    }
  }
  const EngineType type = moved_type(input);
  const rrDataType_t dtype = type.dtype;
  Staged in = stage(input, true);
  const void* send = in.engine.data_ptr();
  void* recv = rank_ == root ? output.data_ptr() : nullptr;
  const size_t count = type.count(in.engine.numel());
  std::vector<at::Tensor> keep{in.engine};
  if (rank_ == root) keep.push_back(output);
  return collective(c10d::OpType::GATHER, opts, kOp, "ringreduce:gather_single", {input}, {output}, keep, nullptr,
                    [&](const EngineCall& c) {
                      return c.call(rrGatherConfig, rrGatherAsyncConfig, send, recv, count, dtype, root);
                    });
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::scatter(std::vector<at::Tensor>& outputs,
                                                               std::vector<std::vector<at::Tensor>>& inputs,
                                                               const c10d::ScatterOptions& opts) {
  static constexpr const char* kOp = "scatter";
  check_single(kOp, outputs);
  check_rank(kOp, "root", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  const EngineType type = moved_type(outputs[0]);
  const rrDataType_t dtype = type.dtype;
  at::Tensor flat;
  if (rank_ == root) {
    check_count(kOp, "the root's input list of lists", inputs.size(), 1);
    check_count(kOp, "the root's input list", inputs[0].size(), size_);
    check_like(kOp, outputs[0], inputs[0], /*same_shape=*/true);
    flat = flatten(inputs[0]);
  } else if (!inputs.empty() && !inputs[0].empty()) {
    throw invalid_argument(kOp, "input tensors are given on rank " + std::to_string(rank_) +
                                    ", which is not the root (" + std::to_string(root) + ")");
  }
  Staged out = stage(outputs[0], false);
  const void* send = flat.defined() ? flat.data_ptr() : nullptr;
  void* recv = out.engine.data_ptr();
  const size_t count = type.count(out.engine.numel());
  std::vector<at::Tensor> keep{out.engine};
  if (flat.defined()) keep.push_back(flat);
  return collective(c10d::OpType::SCATTER, opts, kOp, "ringreduce:scatter", outputs, outputs, keep, copy_back_if_needed(out),
                    [&](const EngineCall& c) {
                      return c.call(rrScatterConfig, rrScatterAsyncConfig, send, recv, count, dtype, root);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                                      const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "reduce_scatter";
  check_single(kOp, outputs);
  check_count(kOp, "the input list of lists", inputs.size(), 1);
  check_count(kOp, "the input list", inputs[0].size(), size_);
  check_like(kOp, outputs[0], inputs[0], /*same_shape=*/true);
  const EngineType type = reduced_type(kOp, outputs[0]);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, outputs[0].scalar_type());
  at::Tensor flat = flatten(inputs[0]);
  Staged out = stage(outputs[0], false);
  const void* send = flat.data_ptr();
  void* recv = out.engine.data_ptr();
  const size_t count = type.count(out.engine.numel());
  return collective(c10d::OpType::REDUCE_SCATTER, opts, kOp, "ringreduce:reduce_scatter",
                    inputs[0], outputs, {flat, out.engine}, copy_back_if_needed(out),
                    [&](const EngineCall& c) {
                      return c.call(rrReduceScatterConfig, rrReduceScatterAsyncConfig, send, recv, count, dtype, op);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                            const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "_reduce_scatter_base";
  check_same_dtype(kOp, output, input);
  if (input.numel() != output.numel() * size_) {
    throw invalid_argument(kOp,
                           "input has " + std::to_string(input.numel()) +
                               " elements, expected group size x output = " + std::to_string(output.numel() * size_));
  }
  const EngineType type = reduced_type(kOp, output);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, output.scalar_type());
  Staged in = stage(input, true);
  Staged out = stage(output, false);
  const void* send = in.engine.data_ptr();
  void* recv = out.engine.data_ptr();
  const size_t count = type.count(out.engine.numel());
  return collective(c10d::OpType::_REDUCE_SCATTER_BASE, opts, kOp, "ringreduce:reduce_scatter_tensor",
                    {input}, {output}, {in.engine, out.engine},
                    copy_back_if_needed(out),
                    [&](const EngineCall& c) {
                      return c.call(rrReduceScatterConfig, rrReduceScatterAsyncConfig, send, recv, count, dtype, op);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::barrier(const c10d::BarrierOptions& opts) {
  return collective(c10d::OpType::BARRIER, opts, "barrier", "ringreduce:barrier", {}, {}, {}, nullptr,
                    [&](const EngineCall& c) { return c.call(rrBarrierConfig, rrBarrierAsyncConfig); });
}

void ProcessGroupRingreduce::check_host_tensor(const char* op_name, const at::Tensor& tensor) const {
  if (on_device(tensor)) {
    throw invalid_argument(op_name, "tensors on " + tensor.device().str() +
                                        " are not supported for send and receive: the engine's point-to-point "
                                        "calls take host memory (copy to the CPU first, or use "
                                        "\"cpu:ringreduce,cuda:nccl\" for them)");
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::point_to_point(c10d::OpType type, const char* op_name,
                                                                      at::Tensor& tensor, int peer, int tag) {
  const bool is_send = type == c10d::OpType::SEND;
  if (peer != RR_ANY_SOURCE) check_rank(op_name, is_send ? "dst" : "src", peer, size_);
  if (tag < 0) throw invalid_argument(op_name, "tag=" + std::to_string(tag) + " is negative");
  const EngineType elements = moved_type(tensor);
  const rrDataType_t dtype = elements.dtype;
  auto state = std::make_shared<PointToPoint>();
  Staged s = stage(tensor, /*copy_in=*/is_send);
  state->keep_alive = {s.engine};
  if (s.needs_copy_back()) state->staged = {s};
  void* buf = s.engine.data_ptr();
  const size_t count = elements.count(s.engine.numel());
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    check_open(op_name);
    use_timeout_locked(op_name, c10d::kUnsetTimeout);
    std::lock_guard<std::mutex> state_lock(state->mutex);
    check_result(is_send ? rrIsendTag(buf, count, dtype, peer, tag, comm_, &state->request)
                         : rrIrecvTag(buf, count, dtype, peer, tag, comm_, &state->request),
                 op_name);
  }
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    // Forget the ended ones; test those whose Work the caller dropped (no one
    // else will), so that they end too.
    p2p_in_flight_.erase(std::remove_if(p2p_in_flight_.begin(), p2p_in_flight_.end(),
                                        [](const std::shared_ptr<PointToPoint>& p) {
                                          if (p.use_count() == 1 && !p->ended.load(std::memory_order_acquire)) {
                                            std::unique_lock<std::mutex> lock(p->mutex, std::try_to_lock);
                                            if (lock.owns_lock()) p->advance_locked(/*block=*/false, "dropped");
                                          }
                                          return p->ended.load(std::memory_order_acquire);
                                        }),
                         p2p_in_flight_.end());
    p2p_in_flight_.push_back(state);
  }
  auto work = c10::make_intrusive<PointToPointWork>(rank_, type, op_name, std::move(state),
                                                    std::vector<at::Tensor>{tensor}, hooks_);
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    if (coalescing_) coalesced_.push_back(work);
  }
  return work;
}

// Neither checks the group's state: torch's _abort_process_group aborts
// groups between the two.
void ProcessGroupRingreduce::startCoalescing() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  if (coalescing_) {
    throw Error(rrInvalidUsage, "ringreduce startCoalescing: the group is already coalescing (no endCoalescing "
                                "since the last startCoalescing)");
  }
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::endCoalescing() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    if (!coalescing_) {
      throw Error(rrInvalidUsage, "ringreduce endCoalescing: the group is not coalescing (no startCoalescing)");
    }
    coalescing_ = false;
    works.swap(coalesced_);
  }
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

namespace {

void check_user_tag(const char* op_name, int tag) {
  if (tag == kMonitoredBarrierReportTag || tag == kMonitoredBarrierAnswerTag) {
    throw invalid_argument(op_name, "tag=" + std::to_string(tag) + " is reserved for monitored_barrier");
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  check_single("send", tensors);
  check_host_tensor("send", tensors[0]);
  check_user_tag("send", tag);
  return point_to_point(c10d::OpType::SEND, "send", tensors[0], dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  check_single("recv", tensors);
  check_host_tensor("recv", tensors[0]);
  check_user_tag("recv", tag);
  return point_to_point(c10d::OpType::RECV, "recv", tensors[0], src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  check_single("recvAnysource", tensors);
  check_host_tensor("recvAnysource", tensors[0]);
  check_user_tag("recvAnysource", tag);
  return point_to_point(c10d::OpType::RECVANYSOURCE, "recvAnysource", tensors[0], RR_ANY_SOURCE, tag);
}

}  // namespace ringreduce_torch
