// Resolving a Python op argument to the engine's rrRedOp_t.

#include "ops.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

#include "../_common/op_policy.hpp"
#include "errors.hpp"

namespace ringreduce_core {

namespace {

// Indexed by rrRedOp_t.
constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
constexpr int kOpCount = static_cast<int>(rrNumOps);
static_assert(std::size(kOpNames) == kOpCount, "a name for every rrRedOp_t");

}  // namespace

rrRedOp_t resolve_op(py::handle op, const Element& e, const char* call) {
  int code = -1;
  if (py::isinstance<py::str>(op)) {
    std::string name = op.cast<std::string>();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    for (int i = 0; i < kOpCount; ++i) {
      if (name == kOpNames[i]) code = i;
    }
    if (code < 0) {
      invalid_argument(std::string(call) + ": op='" + op.cast<std::string>() +
                       "' is not an op; ops: sum, prod, max, min, avg, band, bor, bxor");
    }
  } else if (PyLong_Check(op.ptr())) {
    const long v = PyLong_AsLong(op.ptr());
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v >= kOpCount) {
      invalid_argument(std::string(call) + ": op=" + py::str(op).cast<std::string>() +
                       " is not an op (ringreduce.Op: 0 sum .. 7 bxor)");
    }
    code = static_cast<int>(v);
  } else {
    invalid_argument(std::string(call) + ": op must be a ringreduce.Op or its name, not " + type_name(op));
  }
  const auto kind = e.is_bool ? ringreduce_bindings::ElementKind::kBool
                   : e.is_float ? ringreduce_bindings::ElementKind::kFloat
                                : ringreduce_bindings::ElementKind::kInteger;
  const ringreduce_bindings::OpChoice choice = ringreduce_bindings::choose_op(static_cast<rrRedOp_t>(code), kind);
  if (choice.refused != nullptr) {
    invalid_argument(std::string(call) + ": op=" + kOpNames[code] + " of a " + e.name + " array is refused (" +
                     choice.refused + ")");
  }
  return choice.op;
}

}  // namespace ringreduce_core
