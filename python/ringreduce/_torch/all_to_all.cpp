// all_to_all_single (alltoall_base, with or without split sizes) and the
// list form all_to_all: one rrAllToAllv each; on CUDA tensors, whose memory
// rrAllToAllv does not take, one rrAllToAll where every block has one size.

#include "process_group.hpp"

#include <functional>
#include <string>
#include <vector>

#include "tensors.hpp"

namespace ringreduce_torch {

namespace {

// Counts and displacements of all-to-all's blocks along dim 0, in the
// engine's elements (`per_element` to a tensor element, EngineType): from
// `split_sizes` (rows per peer), or equal blocks when it is empty.
struct Blocks {
  std::vector<size_t> counts;
  std::vector<size_t> displs;
};

Blocks blocks_of(const char* op_name, const char* what, const at::Tensor& t, const std::vector<int64_t>& split_sizes,
                 int size, size_t per_element) {
  if (t.dim() == 0) throw invalid_argument(op_name, std::string(what) + " is a scalar (0-dim) tensor");
  const int64_t rows = t.size(0);
  const int64_t row_elems = rows == 0 ? 0 : t.numel() / rows * static_cast<int64_t>(per_element);
  std::vector<int64_t> splits = split_sizes;
  if (splits.empty()) {
    if (rows % size != 0) {
      throw invalid_argument(op_name, std::string(what) + "'s first dimension (" + std::to_string(rows) +
                                          ") does not divide into " + std::to_string(size) +
                                          " equal blocks; pass split sizes");
    }
    splits.assign(size, rows / size);
  }
  check_count(op_name, what == std::string("input") ? "input_split_sizes" : "output_split_sizes", splits.size(), size);
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) throw invalid_argument(op_name, "a split size is negative: " + std::to_string(s));
    sum += s;
  }
  if (sum != rows) {
    throw invalid_argument(op_name, std::string(what) + " split sizes add up to " + std::to_string(sum) +
                                        " rows, the tensor has " + std::to_string(rows));
  }
  Blocks b;
  size_t offset = 0;
  for (int64_t s : splits) {
    b.counts.push_back(static_cast<size_t>(s * row_elems));
    b.displs.push_back(offset);
    offset += static_cast<size_t>(s * row_elems);
  }
  return b;
}

Blocks blocks_of_list(const std::vector<at::Tensor>& tensors, size_t per_element) {
  Blocks b;
  size_t offset = 0;
  for (const at::Tensor& t : tensors) {
    b.counts.push_back(static_cast<size_t>(t.numel()) * per_element);
    b.displs.push_back(offset);
    offset += static_cast<size_t>(t.numel()) * per_element;
  }
  return b;
}

// The engine call of an all-to-all of `send_blocks` into `recv_blocks`:
// rrAllToAllv; on the device path, rrAllToAll when every block on both sides
// has one size, else refused naming the operation.
std::function<rrResult_t(const EngineCall&)> all_to_all_call(const char* op_name, bool on_device, const void* send,
                                                             const Blocks& send_blocks, void* recv,
                                                             const Blocks& recv_blocks, rrDataType_t dtype) {
  if (!on_device) {
    return [=](const EngineCall& c) {
      return c.call(rrAllToAllvConfig, rrAllToAllvAsyncConfig, send, send_blocks.counts.data(), send_blocks.displs.data(), recv,
                    recv_blocks.counts.data(), recv_blocks.displs.data(), dtype);
    };
  }
  const size_t block = send_blocks.counts.empty() ? 0 : send_blocks.counts.front();
  auto one_size = [block](const Blocks& b) {
    for (size_t count : b.counts) {
      if (count != block) return false;
    }
    return true;
  };
  if (!one_size(send_blocks) || !one_size(recv_blocks)) {
    throw invalid_argument(op_name, "blocks of different sizes are not supported on CUDA tensors (the engine's "
                                    "all-to-all-v takes host memory): use equal blocks, or CPU tensors");
  }
  return [=](const EngineCall& c) { return c.call(rrAllToAllConfig, rrAllToAllAsyncConfig, send, recv, block, dtype); };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                     std::vector<int64_t>& output_split_sizes,
                                                                     std::vector<int64_t>& input_split_sizes,
                                                                     const c10d::AllToAllOptions& opts) {
  static constexpr const char* kOp = "alltoall_base";
  check_same_dtype(kOp, output, input);
  const EngineType type = moved_type(input);
  const rrDataType_t dtype = type.dtype;
  const Blocks send_blocks = blocks_of(kOp, "input", input, input_split_sizes, size_, type.per_element);
  const Blocks recv_blocks = blocks_of(kOp, "output", output, output_split_sizes, size_, type.per_element);
  Staged in = stage(input, true);
  Staged out = stage(output, false);
  const void* send = in.engine.data_ptr();
  void* recv = out.engine.data_ptr();
  return collective(c10d::OpType::ALLTOALL_BASE, opts, kOp, "ringreduce:all_to_all_single",
                    {input}, {output}, {in.engine, out.engine}, copy_back_if_needed(out),
                    all_to_all_call(kOp, on_device(input), send, send_blocks, recv, recv_blocks, dtype));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::alltoall(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllToAllOptions& opts) {
  static constexpr const char* kOp = "alltoall";
  check_count(kOp, "the input list", inputs.size(), size_);
  check_count(kOp, "the output list", outputs.size(), size_);
  check_like(kOp, inputs[0], inputs, /*same_shape=*/false);
  check_like(kOp, inputs[0], outputs, /*same_shape=*/false);
  const EngineType type = moved_type(inputs[0]);
  const rrDataType_t dtype = type.dtype;
  const Blocks send_blocks = blocks_of_list(inputs, type.per_element);
  const Blocks recv_blocks = blocks_of_list(outputs, type.per_element);
  at::Tensor flat_in = flatten(inputs);
  at::Tensor flat_out = flat_like(outputs);
  std::vector<at::Tensor> out = outputs;
  const void* send = flat_in.data_ptr();
  void* recv = flat_out.data_ptr();
  return collective(c10d::OpType::ALLTOALL, opts, kOp, "ringreduce:all_to_all", inputs, outputs, {flat_in, flat_out},
                    [flat_out, out] { copy_out(flat_out, out); },
                    all_to_all_call(kOp, on_device(inputs[0]), send, send_blocks, recv, recv_blocks, dtype));
}

}  // namespace ringreduce_torch
