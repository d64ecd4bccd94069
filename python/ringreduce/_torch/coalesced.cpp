// The coalesced forms: several tensors in one engine call, laid end to end
// in one staging tensor (torch's _coalescing_manager and DDP's bucketing send
// lists; one call pays the engine's per-call cost once).

#include "process_group.hpp"

#include <string>
#include <utility>

#include "errors.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

namespace {

// Throws unless outputs[i] holds `factor` x inputs[i]'s elements, for every i,
// all of one dtype.
void check_pairs(const char* op_name, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                 const char* larger, int64_t factor) {
  if (inputs.empty()) throw invalid_argument(op_name, "the input list is empty");
  check_count(op_name, "the output list", outputs.size(), inputs.size());
  check_like(op_name, inputs[0], inputs, /*same_shape=*/false);
  check_like(op_name, inputs[0], outputs, /*same_shape=*/false);
  const bool output_larger = std::string(larger) == "output";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int64_t small = output_larger ? inputs[i].numel() : outputs[i].numel();
    const int64_t big = output_larger ? outputs[i].numel() : inputs[i].numel();
    if (big != small * factor) {
      throw invalid_argument(op_name, std::string(larger) + " " + std::to_string(i) + " has " + std::to_string(big) +
                                          " elements, expected group size x " +
                                          (output_larger ? "input" : "output") + " = " +
                                          std::to_string(small * factor));
    }
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  static constexpr const char* kOp = "allreduce_coalesced";
  if (tensors.empty()) throw invalid_argument(kOp, "the tensor list is empty");
  check_like(kOp, tensors[0], tensors, /*same_shape=*/false);
  const EngineType type = reduced_type(kOp, tensors[0]);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, tensors[0].scalar_type());
  at::Tensor flat = flatten(tensors);
  void* buf = flat.data_ptr();
  const size_t count = type.count(flat.numel());
  std::vector<at::Tensor> outputs = tensors;
  return collective(c10d::OpType::ALLREDUCE_COALESCED, opts, kOp, "ringreduce:all_reduce_coalesced", tensors, tensors, {flat},
                    [flat, outputs] { copy_out(flat, outputs); },
                    [&](const EngineCall& c) {
                      return c.call(rrAllReduceConfig, rrAllReduceAsyncConfig, buf, buf, count, dtype, op);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "allgather_coalesced";
  if (inputs.empty()) throw invalid_argument(kOp, "the input list is empty");
  check_like(kOp, inputs[0], inputs, /*same_shape=*/false);
  check_count(kOp, "the output list of lists", outputs.size(), size_);
  for (const auto& per_rank : outputs) {
    check_count(kOp, "an output list", per_rank.size(), inputs.size());
    check_like(kOp, inputs[0], per_rank, /*same_shape=*/false);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (per_rank[i].numel() != inputs[i].numel()) {
        throw invalid_argument(kOp, "output tensor " + std::to_string(i) + " has " +
                                        std::to_string(per_rank[i].numel()) + " elements, input " + std::to_string(i) +
                                        " has " + std::to_string(inputs[i].numel()));
      }
    }
  }
  const EngineType type = moved_type(inputs[0]);
  const rrDataType_t dtype = type.dtype;
  at::Tensor flat_in = flatten(inputs);
  const int64_t n = flat_in.numel();
  at::Tensor flat_out = at::empty({n * size_}, flat_in.options());
  std::vector<std::vector<at::Tensor>> out = outputs;
  std::vector<at::Tensor> all;
  for (const auto& per_rank : outputs) all.insert(all.end(), per_rank.begin(), per_rank.end());
  const void* send = flat_in.data_ptr();
  void* recv = flat_out.data_ptr();
  return collective(c10d::OpType::ALLGATHER_COALESCED, opts, kOp, "ringreduce:all_gather_coalesced",
                    inputs, all, {flat_in, flat_out},
                    [flat_out, out, n] {
                      for (size_t r = 0; r < out.size(); ++r) copy_out(flat_out.narrow(0, r * n, n), out[r]);
                    },
                    [&](const EngineCall& c) {
                      return c.call(rrAllGatherConfig, rrAllGatherAsyncConfig, send, recv, type.count(n), dtype);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  static constexpr const char* kOp = "allgather_into_tensor_coalesced";
  check_pairs(kOp, outputs, inputs, "output", size_);
  const EngineType type = moved_type(inputs[0]);
  const rrDataType_t dtype = type.dtype;
  // Every rank's inputs end to end; the gathered blocks are rank-major, so
  // output i's rank-r block is at r * n + (input i's offset).
  at::Tensor flat_in = flatten(inputs);
  const int64_t n = flat_in.numel();
  at::Tensor flat_out = at::empty({n * size_}, flat_in.options());
  std::vector<at::Tensor> out = outputs;
  const int size = size_;
  const void* send = flat_in.data_ptr();
  void* recv = flat_out.data_ptr();
  return collective(c10d::OpType::COALESCED, opts, kOp, "ringreduce:all_gather_into_tensor_coalesced", inputs, outputs,
                    {flat_in, flat_out},
                    [flat_out, out, n, size] {
                      int64_t offset = 0;
                      for (const at::Tensor& o : out) {
                        const int64_t len = o.numel() / size;
                        o.copy_(flat_out.view({size, n}).narrow(1, offset, len).reshape(o.sizes()));
                        offset += len;
                      }
                    },
                    [&](const EngineCall& c) {
                      return c.call(rrAllGatherConfig, rrAllGatherAsyncConfig, send, recv, type.count(n), dtype);
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kOp = "reduce_scatter_tensor_coalesced";
  check_pairs(kOp, outputs, inputs, "input", size_);
  const EngineType type = reduced_type(kOp, inputs[0]);
  const rrDataType_t dtype = type.dtype;
  const rrRedOp_t op = engine_op(kOp, opts.reduceOp, inputs[0].scalar_type());
  // The engine's block r must be every input's rank-r block, end to end: a
  // [size, n] staging tensor whose columns are the inputs' [size, len] views.
  const int64_t n = total_numel(outputs);
  at::Tensor flat_in = at::empty({size_ * n}, inputs[0].options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor rows = flat_in.view({size_, n});
  int64_t offset = 0;
  for (const at::Tensor& in : inputs) {
    const int64_t len = in.numel() / size_;
    rows.narrow(1, offset, len).copy_(in.reshape({size_, len}));
    offset += len;
  }
  at::Tensor flat_out = flat_like(outputs);
  std::vector<at::Tensor> out = outputs;
  const void* send = flat_in.data_ptr();
  void* recv = flat_out.data_ptr();
  return collective(c10d::OpType::COALESCED, opts, kOp, "ringreduce:reduce_scatter_tensor_coalesced", inputs, outputs,
                    {flat_in, flat_out}, [flat_out, out] { copy_out(flat_out, out); },
                    [&](const EngineCall& c) {
                      return c.call(rrReduceScatterConfig, rrReduceScatterAsyncConfig, send, recv, type.count(n), dtype, op);
                    });
}

}  // namespace ringreduce_torch
