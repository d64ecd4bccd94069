// Raising ringreduce.errors' classes from the binding.

#include "errors.hpp"

namespace ringreduce_core {

void raise_error(rrResult_t result, const std::string& message) {
  py::object error = py::module_::import("ringreduce.errors").attr("from_result")(static_cast<int>(result), message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

void invalid_argument(const std::string& message) { raise_error(rrInvalidArgument, message); }
void invalid_usage(const std::string& message) { raise_error(rrInvalidUsage, message); }

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

}  // namespace ringreduce_core
