// Raising ringreduce.errors' classes from the binding.

#include "errors.hpp"

#include "../_common/python_error.hpp"

namespace ringreduce_core {

void raise_error(rrResult_t result, const std::string& message) {
  ringreduce_bindings::set_python_error(result, message);
  throw py::error_already_set();
}

void invalid_argument(const std::string& message) { raise_error(rrInvalidArgument, message); }
void invalid_usage(const std::string& message) { raise_error(rrInvalidUsage, message); }

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

}  // namespace ringreduce_core
