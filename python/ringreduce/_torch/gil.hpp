#pragma once
// Letting go of the GIL before a wait: torch's bindings call the backend
// without it, but a caller that holds it (a backend method called from
// Python directly, a destructor on a thread that holds it) must not wait
// with it held, or every thread that needs it (a future's callback) stops.

#include <Python.h>
#include <pybind11/pybind11.h>

#include <optional>

namespace ringreduce_torch {

// Releases the GIL into `no_gil` when this thread holds it; reacquired when
// `no_gil` goes out of scope.
inline void release_gil_if_held(std::optional<pybind11::gil_scoped_release>* no_gil) {
  if (Py_IsInitialized() && PyGILState_Check()) no_gil->emplace();
}

}  // namespace ringreduce_torch
