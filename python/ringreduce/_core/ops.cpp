// Resolving a Python op argument to the engine's rrRedOp_t.

#include "ops.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

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
  if (e.is_bool) {
    switch (code) {
      case rrSum: case rrMax: case rrBor: return rrMax;    // or
      case rrProd: case rrMin: case rrBand: return rrMin;  // and
      case rrAvg:
        invalid_argument(std::string(call) + ": op=avg of a bool array is refused (bool reduces logically: "
                         "sum, max and bor are or; prod, min and band are and; bxor is xor)");
      default: break;  // bxor: the engine's, on 0/1 bytes
    }
  }
  if (code >= rrBand && e.is_float) {
    invalid_argument(std::string(call) + ": op=" + kOpNames[code] + " is for integer types; the buffers hold " +
                     e.name);
  }
  return static_cast<rrRedOp_t>(code);
}

}  // namespace ringreduce_core
