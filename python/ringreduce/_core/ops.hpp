#pragma once
// Reduction ops as Python passes them (a ringreduce.Op, any int, or a name)
// -> the engine's rrRedOp_t for a buffer's element type.

#include <pybind11/pybind11.h>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"

namespace ringreduce_core {

namespace py = pybind11;

// The rrRedOp_t of `op` for elements `e`; `call` names the method in errors.
// numpy bool reduces logically on 0/1 bytes: or is max, and is min, xor is
// bxor. Refuses avg on bool and bitwise ops on floating types.
rrRedOp_t resolve_op(py::handle op, const Element& e, const char* call);

}  // namespace ringreduce_core
