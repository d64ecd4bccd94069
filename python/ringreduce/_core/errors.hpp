#pragma once
// Failures as ringreduce.errors' classes. Every raise asks
// ringreduce.errors.from_result for the class of a result code, so the
// binding's own argument checks and the engine's failures reach Python as the
// same classes, each carrying its message.

#include <pybind11/pybind11.h>

#include <string>

#include <ringreduce/ringreduce.h>

namespace ringreduce_core {

namespace py = pybind11;

// Raises ringreduce.errors' class for `result`, carrying `message`.
[[noreturn]] void raise_error(rrResult_t result, const std::string& message);

// The binding's own checks: rrInvalidArgument's and rrInvalidUsage's classes.
[[noreturn]] void invalid_argument(const std::string& message);
[[noreturn]] void invalid_usage(const std::string& message);

// The Python type name of `obj` ("numpy.ndarray"), for messages.
std::string type_name(py::handle obj);

}  // namespace ringreduce_core
