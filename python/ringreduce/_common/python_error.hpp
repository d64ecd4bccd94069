#pragma once
// How both Python extensions raise a result code: as the class
// ringreduce.errors.from_result gives for it (a ringreduce.Error subclass,
// each a RuntimeError or ValueError as Python's users expect), carrying the
// message. Sets the Python error; the caller then leaves through pybind11
// (error_already_set, or returning from an exception translator).

#include <pybind11/pybind11.h>

#include <string>

#include <ringreduce/ringreduce.h>

namespace ringreduce_bindings {

inline void set_python_error(rrResult_t result, const std::string& message) {
  namespace py = pybind11;
  py::object error = py::module_::import("ringreduce.errors").attr("from_result")(static_cast<int>(result), message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

}  // namespace ringreduce_bindings
