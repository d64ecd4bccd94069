// ringreduce._torch: the c10d::Backend class that ringreduce.torch registers
// as torch.distributed's backend "ringreduce" (the unique id it passes
// through the group's store is ringreduce.get_unique_id()'s).

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <string>

#include "../_common/python_error.hpp"
#include "errors.hpp"
#include "process_group.hpp"

namespace py = pybind11;
using ringreduce_torch::FakeDeviceSeam;
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
      ringreduce_bindings::set_python_error(e.result(), e.what());
    }
  });

  // The device types this build takes tensors of (RR_TORCH_CUDA: set by
  // python/meson.build when the CUDA toolkit's major version is torch's).
  m.attr("DEVICES") = RR_TORCH_CUDA ? py::tuple(py::make_tuple("cpu", "cuda")) : py::tuple(py::make_tuple("cpu"));

  // Whether the backend implements torch's reconfigure API (torch >= 2.14's
  // headers declare it).
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  m.attr("RECONFIGURE") = true;
#else
  m.attr("RECONFIGURE") = false;
#endif

  m.def("shutdown_all", &ProcessGroupRingreduce::shutdown_all, py::call_guard<py::gil_scoped_release>(),
        "Shuts down every ringreduce backend of this process (ringreduce.torch calls it at exit, before the "
        "interpreter finalizes); in a forked child, nothing.");

  auto backend_class = py::class_<ProcessGroupRingreduce, c10d::Backend, c10::intrusive_ptr<ProcessGroupRingreduce>>(
      m, "ProcessGroupRingreduce",
      "torch.distributed's backend 'ringreduce': a c10d Backend over one ringreduce communicator.");

  using Options = ProcessGroupRingreduce::Options;
  py::class_<Options, c10d::Backend::Options, c10::intrusive_ptr<Options>>(
      backend_class, "Options",
      "The engine's settings for a group: init_process_group(\"ringreduce\", pg_options=...) and "
      "new_group(pg_options=...). A field left unset (0 / -1) takes its RR_* environment variable or the "
      "engine's default; the group's timeout is always init_process_group's.")
      .def(py::init([](size_t chunk_bytes, int pipeline_depth, int check_arguments, int debug_level) {
             auto options = c10::make_intrusive<Options>();
             options->chunk_bytes = chunk_bytes;
             options->pipeline_depth = pipeline_depth;
             options->check_arguments = check_arguments;
             options->debug_level = debug_level;
             return options;
           }),
           py::kw_only(), py::arg("chunk_bytes") = 0, py::arg("pipeline_depth") = RR_CONFIG_UNDEF_INT,
           py::arg("check_arguments") = RR_CONFIG_UNDEF_INT, py::arg("debug_level") = RR_CONFIG_UNDEF_INT)
      .def_readwrite("chunk_bytes", &Options::chunk_bytes,
                     "Largest piece of a segment moved at once, in bytes (RR_CHUNK_BYTES); 0: unset.")
      .def_readwrite("pipeline_depth", &Options::pipeline_depth,
                     "Chunk columns in flight at once (RR_PIPELINE_DEPTH); -1: unset (sized at init).")
      .def_readwrite("check_arguments", &Options::check_arguments,
                     "1: compare every collective's arguments with the ring neighbours' first; 0: skip it "
                     "(RR_CHECK_ARGUMENTS); -1: unset.")
      .def_readwrite("debug_level", &Options::debug_level, "0 WARN, 1 INFO, 2 TRACE (RR_DEBUG); -1: unset.");

  backend_class
      .def(py::init([](int rank, int size, const std::string& unique_id, std::chrono::milliseconds timeout,
                       const c10::intrusive_ptr<Options>& options) {
             if (unique_id.size() != RR_UNIQUE_ID_BYTES) {
               throw ringreduce_torch::invalid_argument("init", "unique_id has " + std::to_string(unique_id.size()) +
                                                                    " bytes, expected " +
                                                                    std::to_string(RR_UNIQUE_ID_BYTES));
             }
             rrUniqueId id;
             std::memcpy(id.internal, unique_id.data(), RR_UNIQUE_ID_BYTES);
             // The group's own copy, with the group's timeout.
             auto mine = options ? c10::make_intrusive<Options>(*options) : c10::make_intrusive<Options>();
             mine->timeout = timeout;
             py::gil_scoped_release no_gil;  // every rank waits here for the others
             auto backend = c10::make_intrusive<ProcessGroupRingreduce>(rank, size, id, std::move(mine));
             ProcessGroupRingreduce::track(backend);
             return backend;
           }),
           py::arg("rank"), py::arg("size"), py::arg("unique_id"), py::arg("timeout"),
           py::arg("options") = py::none(),
           "Joins the communicator named by unique_id (made by group rank 0) with options' settings; timeout "
           "bounds every operation.")
      .def_static(
          "unconfigured",
          [](int rank, int size, std::chrono::milliseconds timeout, const c10::intrusive_ptr<Options>& options) {
            auto mine = options ? c10::make_intrusive<Options>(*options) : c10::make_intrusive<Options>();
            mine->timeout = timeout;
            auto backend = c10::make_intrusive<ProcessGroupRingreduce>(rank, size, std::move(mine));
            ProcessGroupRingreduce::track(backend);
            return backend;
          },
          py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("options") = py::none(),
          "A group made with enable_reconfigure=True: no communicator until dist._reconfigure(uuid, handles) "
          "makes one from the members' get_reconfigure_handle() handles; timeout bounds every operation.")
      .def("abort", &ProcessGroupRingreduce::abort, py::call_guard<py::gil_scoped_release>(),
           "Ends the communicator now: operations in flight fail here at once, and at the peers naming this rank.")
      .def("agree_on_failed", &ProcessGroupRingreduce::agree_on_failed, py::arg("revoke") = true,
           py::call_guard<py::gil_scoped_release>(),
           "rrCommAgreeFailed (after rrCommRevoke unless revoke=False): the ranks every survivor agrees failed, "
           "ascending; every rank still alive must call it. What dist.shrink_group then excludes.")
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
           "rrGetLastError: the text of the communicator's last error (what broke it, naming the peer).")
      .def(
          "_use_fake_device_seam",
          [](ProcessGroupRingreduce& pg) {
            auto seam = std::make_shared<FakeDeviceSeam>();
            pg.use_fake_device_seam(seam);
            return seam;
          },
          "Tests without a GPU: this group's collectives on CPU tensors take the device path from now on, "
          "its CUDA calls made on a recording fake (returned).");

  py::class_<FakeDeviceSeam, std::shared_ptr<FakeDeviceSeam>>(
      m, "_FakeDeviceSeam", "The device path's CUDA calls, recorded by name (device_seam.hpp).")
      .def("take_trace", &FakeDeviceSeam::take_trace, "The calls made since the last take_trace(), in order.")
      .def("set_capturing", &FakeDeviceSeam::set_capturing, py::arg("capturing"),
           "What cudaStreamIsCapturing answers from now on.")
      .def("set_reached", &FakeDeviceSeam::set_reached, py::arg("reached"),
           "What cudaEventQuery answers from now on (True: the GPU passed every event).");
}
