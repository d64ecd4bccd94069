#pragma once
// What torch's tensors, dtypes and reduce ops mean to the engine's C API:
// the checks every operation makes first (they throw with the operation's
// name, as ProcessGroupGloo's assert* helpers do), and the contiguous views
// the engine reads and writes.

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

// The engine's element type of a tensor's dtype. bool travels as uint8 (0 or
// 1), reduced with the logical op that engine_op() picks for it.
rrDataType_t engine_dtype(const char* op_name, const at::Tensor& tensor);

// The engine's op for a torch reduce op on a tensor of `dtype`. bool: sum and
// max are or, product and min are and (Gloo's results on 0/1), the bitwise
// ops are themselves; avg on bool, bitwise ops on floating types and
// PREMUL_SUM are refused, naming the op.
rrRedOp_t engine_op(const char* op_name, const c10d::ReduceOp& op, at::ScalarType dtype);

// Throws unless `tensor` lives in CPU memory and is dense (strided). Names the
// operation and what was wrong, as the backend's every error does.
void check_cpu_dense(const char* op_name, const at::Tensor& tensor);
// Throws unless `tensors` holds exactly one tensor (the engine serves one
// device per process, as torch.distributed calls it).
void check_single(const char* op_name, const std::vector<at::Tensor>& tensors);
// Throws unless every tensor in `tensors` has `like`'s dtype (and, with
// same_shape, its shape).
void check_like(const char* op_name, const at::Tensor& like, const std::vector<at::Tensor>& tensors,
                bool same_shape);
void check_rank(const char* op_name, const char* what, int64_t rank, int size);
// Throws unless rootTensor is 0 (one tensor per process).
void check_root_tensor(const char* op_name, int64_t root_tensor);
// Throws unless a list (`what`) holds `expected` entries.
void check_count(const char* op_name, const char* what, size_t got, size_t expected);
// Throws unless both are CPU dense tensors of one dtype.
void check_same_dtype(const char* op_name, const at::Tensor& output, const at::Tensor& input);

// A tensor the engine can use in place of `user`: `user` itself when it is
// contiguous, else a contiguous copy (made now when `copy_in`) that
// copy_back() writes into `user` once the call succeeded (torch 1.13's Gloo
// reduced the first numel() elements of a non-contiguous tensor's storage).
struct Staged {
  at::Tensor user;
  at::Tensor engine;
  bool needs_copy_back() const { return !engine.is_same(user); }
};
Staged stage(const at::Tensor& user, bool copy_in);
void copy_back(const std::vector<Staged>& staged);
// copy_back of `s` as a Work's on-success step, or nothing where `s` is the
// user's own tensor.
std::function<void()> copy_back_if_needed(const Staged& s);

// The tensors laid end to end in one new contiguous tensor (their dtype), for
// the coalesced and list forms; copy_out() writes the pieces back.
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
at::Tensor flat_like(const std::vector<at::Tensor>& tensors);
void copy_out(const at::Tensor& flat, const std::vector<at::Tensor>& tensors);

// Sum of numel() over `tensors`.
int64_t total_numel(const std::vector<at::Tensor>& tensors);

}  // namespace ringreduce_torch
