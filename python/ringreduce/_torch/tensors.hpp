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

#include "errors.hpp"

namespace ringreduce_torch {

// How the engine carries a tensor's elements: as `dtype`, `per_element` of
// them to each element of the tensor.
struct EngineType {
  rrDataType_t dtype;
  size_t per_element = 1;
  size_t count(int64_t numel) const { return static_cast<size_t>(numel) * per_element; }
};

// For the operations that only move data (broadcast, the gathers, scatter,
// the all-to-alls, send and recv): the engine's own type where it has one,
// else the element's bytes (int16, uint16, the float8s, complex, ...): any
// dtype moves. bool travels as uint8.
EngineType moved_type(const at::Tensor& tensor);

// For the reducing ones: the engine's own type (bool as uint8 0 or 1, which
// engine_op() reduces with a logical op); complex as pairs of its real type,
// which SUM and AVG reduce part by part. A dtype the engine cannot reduce
// (int16, uint16, float8) is refused, naming it.
EngineType reduced_type(const char* op_name, const at::Tensor& tensor);

// The engine's op for a torch reduce op on a tensor of `dtype`. bool: sum and
// max are or, product and min are and (Gloo's results on 0/1), the bitwise
// ops are themselves; AVG on integers is NCCL's (the sum, wrapped in the
// type, divided and truncated). Refused, naming the op and the dtype: AVG on
// bool, bitwise ops on floating and complex types, PRODUCT, MIN and MAX on
// complex, PREMUL_SUM.
rrRedOp_t engine_op(const char* op_name, const c10d::ReduceOp& op, at::ScalarType dtype);

// A reduce op's name as torch spells it ("SUM", "AVG", ..., "PREMUL_SUM").
const char* reduce_op_name(const c10d::ReduceOp& op);
// The reduce op named `name` in lower case ("sum", "avg", "product", "min",
// "max", "band", "bor", "bxor"); throws naming `op_name` and the choices.
c10d::ReduceOp reduce_op_named(const char* op_name, const std::string& name);

// Throws unless `tensor` is dense (strided) and in CPU memory, or on a CUDA
// device in the CUDA build (RR_TORCH_CUDA). Names the operation and what was
// wrong, as the backend's every error does.
void check_dense(const char* op_name, const at::Tensor& tensor);
// Throws capture_refused when `tensor` is a CUDA tensor whose device's
// current stream is being captured into a CUDA graph: once per operation,
// before it stages anything (its copies would be captured);
// device_collective checks again. check_single, check_like and
// check_same_dtype make it.
void check_not_capturing(const char* op_name, const at::Tensor& tensor);
// The refusal of a call under CUDA graph capture, naming the operation.
Error capture_refused(const char* op_name);
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
// Throws unless both pass check_dense and have one dtype.
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
