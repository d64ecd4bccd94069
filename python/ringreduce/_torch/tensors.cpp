#include "tensors.hpp"

#include <c10/util/irange.h>

#include <cctype>
#include <optional>

#include "../_common/op_policy.hpp"
#include "device_seam.hpp"
#include "errors.hpp"

namespace ringreduce_torch {

namespace {

// The engine's own type of `dtype`, if it has one.
std::optional<rrDataType_t> native_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return rrFloat32;
    case at::kDouble: return rrFloat64;
    case at::kHalf: return rrFloat16;
    case at::kBFloat16: return rrBfloat16;
    case at::kChar: return rrInt8;
    case at::kByte: return rrUint8;
    case at::kBool: return rrUint8;
    case at::kInt: return rrInt32;
    case at::kUInt32: return rrUint32;
    case at::kLong: return rrInt64;
    case at::kUInt64: return rrUint64;
    default: return std::nullopt;
  }
}

// The reduce ops a caller may name, in torch's order: torch's, its name,
// the engine's. (AVG of integers as NCCL's: the sum, wrapped in the type,
// divided and truncated.)
struct NamedOp {
  c10d::ReduceOp::RedOpType type;
  const char* name;
  rrRedOp_t engine;
};
constexpr NamedOp kNamedOps[] = {
    {c10d::ReduceOp::SUM, "SUM", rrSum},   {c10d::ReduceOp::AVG, "AVG", rrAvg},
    {c10d::ReduceOp::PRODUCT, "PRODUCT", rrProd}, {c10d::ReduceOp::MIN, "MIN", rrMin},
    {c10d::ReduceOp::MAX, "MAX", rrMax},   {c10d::ReduceOp::BAND, "BAND", rrBand},
    {c10d::ReduceOp::BOR, "BOR", rrBor},   {c10d::ReduceOp::BXOR, "BXOR", rrBxor},
};

const NamedOp* named_op(const c10d::ReduceOp& op) {
  for (const NamedOp& named : kNamedOps) {
    if (op.op_ == named.type) return &named;
  }
  return nullptr;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* reduce_op_name(const c10d::ReduceOp& op) {
  if (const NamedOp* named = named_op(op)) return named->name;
  return op.op_ == c10d::ReduceOp::PREMUL_SUM ? "PREMUL_SUM" : "unknown";
}

c10d::ReduceOp reduce_op_named(const char* op_name, const std::string& name) {
  std::string choices;
  for (const NamedOp& named : kNamedOps) {
    if (name == lower(named.name)) return named.type;
    choices += (choices.empty() ? "" : ", ") + lower(named.name);
  }
  throw invalid_argument(op_name, "op=\"" + name + "\" is not one of " + choices);
}

EngineType moved_type(const at::Tensor& tensor) {
  if (auto native = native_type(tensor.scalar_type())) return EngineType{*native, 1};
  return EngineType{rrUint8, static_cast<size_t>(tensor.element_size())};
}

EngineType reduced_type(const char* op_name, const at::Tensor& tensor) {
  const at::ScalarType dtype = tensor.scalar_type();
  if (auto native = native_type(dtype)) return EngineType{*native, 1};
  switch (dtype) {
    case at::kComplexHalf: return EngineType{rrFloat16, 2};
    case at::kComplexFloat: return EngineType{rrFloat32, 2};
    case at::kComplexDouble: return EngineType{rrFloat64, 2};
    default:
      throw invalid_argument(op_name, std::string("dtype ") + c10::toString(dtype) +
                                          " cannot be reduced (the engine reduces float16, bfloat16, float32, "
                                          "float64, int8, uint8, int32, uint32, int64, uint64, bool and complex); "
                                          "it moves in the operations that do not reduce");
  }
}

rrRedOp_t engine_op(const char* op_name, const c10d::ReduceOp& op, at::ScalarType dtype) {
  const NamedOp* named = named_op(op);
  if (named == nullptr) {
    if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
      throw invalid_argument(op_name, std::string("reduce op PREMUL_SUM is not supported (NCCL's only)"));
    }
    throw invalid_argument(op_name, std::string("unknown reduce op ") + std::to_string(static_cast<int>(op.op_)));
  }
  using ringreduce_bindings::ElementKind;
  const ElementKind kind = dtype == at::kBool                                 ? ElementKind::kBool
                           : at::isComplexType(dtype)                         ? ElementKind::kComplex
                           : at::isIntegralType(dtype, /*includeBool=*/false) ? ElementKind::kInteger
                                                                              : ElementKind::kFloat;
  const ringreduce_bindings::OpChoice choice = ringreduce_bindings::choose_op(named->engine, kind);
  if (choice.refused != nullptr) {
    throw invalid_argument(op_name, std::string("reduce op ") + named->name + " is not supported for dtype " +
                                        c10::toString(dtype) + " (" + choice.refused + ")");
  }
  return choice.op;
}

void check_dense(const char* op_name, const at::Tensor& tensor) {
  if (!tensor.defined()) {
    throw invalid_argument(op_name, std::string("a tensor is undefined"));
  }
  if (!tensor.device().is_cpu() && !(RR_TORCH_CUDA && tensor.is_cuda())) {
    throw invalid_argument(op_name, std::string("tensors on device ") + tensor.device().str() +
                                        " are not supported by this build of the backend, which takes " +
                                        (RR_TORCH_CUDA ? "CPU and CUDA tensors" : "CPU tensors") +
                                        " (ringreduce.torch.DEVICES says which; README: CUDA tensors)");
  }
  if (tensor.layout() != at::kStrided) {
    throw invalid_argument(op_name,
                           std::string("only dense (strided) tensors are supported, not ") + c10::str(tensor.layout()));
  }
}

void check_not_capturing(const char* op_name, const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return;
  if (const std::shared_ptr<DeviceSeam> seam = cuda_seam()) {
    if (seam->capturing(seam->current_stream(tensor.device()))) throw capture_refused(op_name);
  }
}

Error capture_refused(const char* op_name) {
  return Error(rrInvalidUsage, std::string("ringreduce ") + op_name +
                                   ": the current CUDA stream is being captured into a CUDA graph "
                                   "(cudaStreamIsCapturing); ringreduce's calls cannot be captured: make the call "
                                   "outside the capture");
}

void check_single(const char* op_name, const std::vector<at::Tensor>& tensors) {
  if (tensors.size() != 1) {
    throw invalid_argument(op_name,
                           std::string("expects one tensor per process, got ") + std::to_string(tensors.size()));
  }
  check_dense(op_name, tensors[0]);
  check_not_capturing(op_name, tensors[0]);
}

void check_like(const char* op_name, const at::Tensor& like, const std::vector<at::Tensor>& tensors, bool same_shape) {
  for (const auto i : c10::irange(tensors.size())) {
    const at::Tensor& t = tensors[i];
    check_dense(op_name, t);
    if (t.scalar_type() != like.scalar_type()) {
      throw invalid_argument(op_name, std::string("tensor ") + std::to_string(i) + " has dtype " +
                                          c10::toString(t.scalar_type()) + ", expected " +
                                          c10::toString(like.scalar_type()));
    }
    if (same_shape && !t.sizes().equals(like.sizes())) {
      throw invalid_argument(op_name, std::string("tensor ") + std::to_string(i) + " has shape " + c10::str(t.sizes()) +
                                          ", expected " + c10::str(like.sizes()));
    }
  }
  if (!tensors.empty()) check_not_capturing(op_name, tensors[0]);  // once: the list shares a device
}

void check_rank(const char* op_name, const char* what, int64_t rank, int size) {
  if (rank < 0 || rank >= size) {
    throw invalid_argument(op_name, std::string() + what + "=" + std::to_string(rank) +
                                        " is out of range for a group of " + std::to_string(size) + " ranks");
  }
}

Staged stage(const at::Tensor& user, bool copy_in) {
  if (user.is_contiguous()) return Staged{user, user};
  at::Tensor engine = copy_in ? user.contiguous() : at::empty(user.sizes(), user.options());
  return Staged{user, engine};
}

void copy_back(const std::vector<Staged>& staged) {
  for (const Staged& s : staged) {
    if (s.needs_copy_back()) s.user.copy_(s.engine);
  }
}

void check_root_tensor(const char* op_name, int64_t root_tensor) {
  if (root_tensor != 0) {
    throw invalid_argument(op_name,
                           "rootTensor=" + std::to_string(root_tensor) + " is out of range for one tensor per process");
  }
}

void check_count(const char* op_name, const char* what, size_t got, size_t expected) {
  if (got != expected) {
    throw invalid_argument(op_name, std::string(what) + " holds " + std::to_string(got) + " entries, expected " +
                                        std::to_string(expected));
  }
}

void check_same_dtype(const char* op_name, const at::Tensor& output, const at::Tensor& input) {
  check_dense(op_name, output);
  check_dense(op_name, input);
  check_not_capturing(op_name, input);
  if (output.scalar_type() != input.scalar_type()) {
    throw invalid_argument(op_name, "output dtype " + std::string(c10::toString(output.scalar_type())) +
                                        " differs from input dtype " + c10::toString(input.scalar_type()));
  }
}

std::function<void()> copy_back_if_needed(const Staged& s) {
  if (!s.needs_copy_back()) return nullptr;
  return [s] { copy_back({s}); };
}


int64_t total_numel(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.numel();
  return n;
}

at::Tensor flat_like(const std::vector<at::Tensor>& tensors) {
  return at::empty({total_numel(tensors)}, tensors.at(0).options().memory_format(at::MemoryFormat::Contiguous));
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  at::Tensor flat = flat_like(tensors);
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    // view_as a flat slice, then copy_ walks t's strides: no contiguous() temporary.
    flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

void copy_out(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace ringreduce_torch
