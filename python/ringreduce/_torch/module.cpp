// ringreduce._torch: the c10d::Backend class that ringreduce.torch registers
// as torch.distributed's backend "ringreduce", and the unique id it passes
// through the group's store.

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <string>

#include "errors.hpp"
#include "process_group.hpp"

namespace py = pybind11;
using ringreduce_torch::ProcessGroupRingreduce;

PYBIND11_MODULE(_torch, m) {
  m.doc() = "ringreduce's torch.distributed backend (see ringreduce.torch)";
  // c10d::Backend's Python type, the base class below.
  py::module_::import("torch.distributed");

  // The backend's failures as ringreduce.Error subclasses, which are
  // RuntimeErrors as torch.distributed's users expect; Work.wait() raises
  // them too (translators are shared with torch's bindings).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ringreduce_torch::Error& e) {
      py::object error = py::module_::import("ringreduce.errors").attr("from_result")(static_cast<int>(e.result()), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    }
  });

  // The device types this build takes tensors of (RR_TORCH_CUDA: set by
  // python/meson.build, which so far builds every backend for "cpu" only).
  m.attr("DEVICES") = RR_TORCH_CUDA ? py::tuple(py::make_tuple("cpu", "cuda")) : py::tuple(py::make_tuple("cpu"));

  m.def(
      "unique_id",
      [] {
        rrUniqueId id;
        ringreduce_torch::check_result(rrGetUniqueId(&id), "unique id");
        return py::bytes(id.internal, RR_UNIQUE_ID_BYTES);
      },
      "A new unique id: this process serves the rendezvous of the communicator it names.");

  m.def("shutdown_all", &ProcessGroupRingreduce::shutdown_all, py::call_guard<py::gil_scoped_release>(),
        "Shuts down every ringreduce backend of this process (ringreduce.torch calls it at exit, before the "
        "interpreter finalizes); in a forked child, nothing.");

  py::class_<ProcessGroupRingreduce, c10d::Backend, c10::intrusive_ptr<ProcessGroupRingreduce>>(
      m, "ProcessGroupRingreduce",
      "torch.distributed's backend 'ringreduce': a c10d Backend over one ringreduce communicator.")
      .def(py::init([](int rank, int size, const std::string& unique_id, std::chrono::milliseconds timeout) {
             if (unique_id.size() != RR_UNIQUE_ID_BYTES) {
               throw ringreduce_torch::invalid_argument("init", "unique_id has " + std::to_string(unique_id.size()) +
                                                                    " bytes, expected " +
                                                                    std::to_string(RR_UNIQUE_ID_BYTES));
             }
             rrUniqueId id;
             std::memcpy(id.internal, unique_id.data(), RR_UNIQUE_ID_BYTES);
             py::gil_scoped_release no_gil;  // every rank waits here for the others
             auto backend = c10::make_intrusive<ProcessGroupRingreduce>(rank, size, id, timeout);
             ProcessGroupRingreduce::track(backend);
             return backend;
           }),
           py::arg("rank"), py::arg("size"), py::arg("unique_id"), py::arg("timeout"),
           "Joins the communicator named by unique_id (made by group rank 0); timeout bounds every operation.")
      .def("abort", &ProcessGroupRingreduce::abort, py::call_guard<py::gil_scoped_release>(),
           "Ends the communicator now: operations in flight fail here at once, and at the peers naming this rank.")
      .def("shutdown", &ProcessGroupRingreduce::shutdown, py::call_guard<py::gil_scoped_release>(),
           "What destroy_process_group calls: destroys the communicator, or aborts it when operations are still "
           "in flight, and waits for every Work to end.")
      .def("perform_nocolor_split",
           [](ProcessGroupRingreduce&, const py::object&) {},
           py::arg("device"),
           "What new_group's non-members call on a group that splits (one bound to a device): nothing here. "
           "The members make the new group's communicator through the store, as for any plugin backend, not "
           "by splitting this one, so there is no split for a non-member to join.")
      .def("async_error",
           [](ProcessGroupRingreduce& pg) { return static_cast<int>(pg.async_error()); },
           "rrCommGetAsyncError: 0 while the communicator is healthy, else the result code that broke it.")
      .def("last_error", &ProcessGroupRingreduce::last_error,
           "rrGetLastError: the text of the communicator's last error (what broke it, naming the peer).");
}
