#pragma once
// Point-to-point as ringreduce.Comm's methods (send, recv, isend, irecv, with
// tags and ANY_SOURCE) and the group calls that ringreduce.group() wraps.

#include <pybind11/pybind11.h>

#include "comm.hpp"

namespace ringreduce_core {

namespace py = pybind11;

// Adds ANY_SOURCE, _group_start and _group_end to `m`, and the
// point-to-point methods to `comm`.
void bind_point_to_point(py::module_& m, CommClass& comm);

}  // namespace ringreduce_core
