// ringreduce.Comm's lifecycle: init (from_env, init, init_rank), split,
// destroy, abort, and what it reports about itself.

#include "comm.hpp"

#include <pybind11/stl.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <optional>

namespace ringreduce_core {

// A timeout in seconds as the engine's milliseconds (rounded up), or raises naming it.
int timeout_ms_of(const char* call, double timeout) {
  const double ms = std::ceil(timeout * 1000.0);
  if (!(timeout > 0) || !std::isfinite(timeout) || ms > INT_MAX) {
    invalid_argument(std::string(call) + ": timeout=" + py::str(py::float_(timeout)).cast<std::string>() +
                     " must be a positive number of seconds (at most " + std::to_string(INT_MAX / 1000) + ")");
  }
  return static_cast<int>(ms);
}

namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

CommPtr adopt(rrComm_t c) {
  int rank = -1;
  int size = 0;
  if (rrCommUserRank(c, &rank) != rrSuccess || rrCommCount(c, &size) != rrSuccess) {
    const std::string message = rrGetLastError(nullptr);
    (void)rrCommDestroy(c);
    raise_error(rrInternalError, message);
  }
  return std::make_shared<CommState>(c, rank, size);
}

rrConfig_t make_config(const char* call, std::optional<double> timeout, std::optional<long long> chunk_bytes,
                       std::optional<int> pipeline_depth, std::optional<bool> check_arguments) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  if (timeout) config.timeout_ms = timeout_ms_of(call, *timeout);
  if (chunk_bytes) {
    if (*chunk_bytes <= 0) invalid_argument(std::string(call) + ": chunk_bytes=" + std::to_string(*chunk_bytes) + " must be > 0");
    config.chunk_bytes = static_cast<size_t>(*chunk_bytes);
  }
  if (pipeline_depth) {
    if (*pipeline_depth <= 0) invalid_argument(std::string(call) + ": pipeline_depth=" + std::to_string(*pipeline_depth) + " must be > 0");
    config.pipeline_depth = *pipeline_depth;
  }
  if (check_arguments) config.check_arguments = *check_arguments ? 1 : 0;
  return config;
}

// Runs an init call without the GIL; adopts the communicator or raises.
template <typename F>
CommPtr init_comm(F&& f) {
  rrComm_t c = nullptr;
  rrResult_t r;
  std::string message;
  {
    py::gil_scoped_release nogil;
    r = f(&c);
    if (r != rrSuccess) message = rrGetLastError(nullptr);
  }
  if (r != rrSuccess) raise_error(r, message);
  return adopt(c);
}

rrUniqueId unique_id_of(py::handle obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    invalid_argument("init_rank: unique_id (" + type_name(obj) + ") is not bytes-like; pass ringreduce.get_unique_id()'s");
  }
  rrUniqueId id{};
  const bool ok = view.len == static_cast<Py_ssize_t>(sizeof id.internal);
  if (ok) std::memcpy(id.internal, view.buf, sizeof id.internal);
  const Py_ssize_t len = view.len;
  PyBuffer_Release(&view);
  if (!ok) {
    invalid_argument("init_rank: unique_id has " + std::to_string(len) + " bytes; an rrUniqueId has " +
                     std::to_string(sizeof id.internal));
  }
  return id;
}

}  // namespace

void CommState::destroy(bool raise) {
  if (!comm.load()) return;
  // rrCommDestroy refuses a communicator with requests in flight: finish
  // them first (each within the timeout); their errors stay on their Request.
  for (const auto& p : std::vector<std::shared_ptr<Pending>>(pending)) settle(*this, p, Settle::kWait, 0, false);
  rrResult_t r = rrSuccess;
  std::string message;
  {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(lifetime);
    rrComm_t c = comm.exchange(nullptr);
    if (c) {
      closed_by = "destroyed (Comm.destroy)";
      r = rrCommDestroy(c);
      if (r != rrSuccess) {
        message = rrGetLastError(nullptr);
        comm = c;  // still alive: a request issued meanwhile, on another thread
      }
    }
  }
  if (r != rrSuccess && raise) raise_error(r, message);
}

void CommState::abort() {
  rrResult_t r = rrSuccess;
  std::string message;
  {
    py::gil_scoped_release nogil;
    // Not under `lifetime`: calls in flight must see the abort and return.
    rrComm_t c = comm.exchange(nullptr);
    if (!c) return;
    closed_by = "aborted (Comm.abort)";
    r = rrCommAbort(c);
    if (r != rrSuccess) message = rrGetLastError(nullptr);
  }
  // The aborted communicator's requests answer at once: finish them so that
  // their buffers are let go, also those no Request object holds any more.
  for (const auto& p : std::vector<std::shared_ptr<Pending>>(pending)) settle(*this, p, Settle::kWait, 0, false);
  if (r != rrSuccess) raise_error(r, message);
}

CommState::~CommState() {
  if (!comm.load() && pending.empty()) return;
  if (interpreter_finalizing()) {
    // No engine call and no release at exit: the engine may still be
    // writing into these buffers.
    for (auto& p : pending) {
      for (auto& b : p->buffers) b.leak();
    }
    return;
  }
  py::error_scope keep_error;  // a dealloc must not disturb an exception in flight
  try {
    destroy(false);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("ringreduce.Comm.__del__");
  } catch (...) {
  }
}

CommClass bind_comm(py::module_& m) {
  CommClass comm(m, "Comm",
      "A communicator (rrComm_t): rank, size and the collectives, on buffers.\n\n"
      "Make one with Comm.from_env(), Comm.init(url, ...) or Comm.init_rank(nranks, unique_id, rank). "
      "Buffers are numpy arrays or any C-contiguous object with the buffer protocol; the element type "
      "comes from the buffer (int8, uint8, int32, uint32, int64, uint64, float16, float32, float64; bool "
      "as uint8, reducing logically). Counts come from the buffers' sizes. In place: pass "
      "ringreduce.IN_PLACE as sendbuf (scatter: as recvbuf, on the root). Blocking calls release the GIL. "
      "As a context manager it is destroyed on exit, or aborted when the block raises.");

  comm.def_static("from_env",
      [](std::optional<double> timeout, std::optional<long long> chunk_bytes, std::optional<int> pipeline_depth,
         std::optional<bool> check_arguments) {
        rrConfig_t config = make_config("from_env", timeout, chunk_bytes, pipeline_depth, check_arguments);
        return init_comm([&](rrComm_t* c) { return rrCommInitUrl(c, "env://", -1, -1, &config); });
      },
      py::kw_only(), py::arg("timeout") = py::none(), py::arg("chunk_bytes") = py::none(),
      py::arg("pipeline_depth") = py::none(), py::arg("check_arguments") = py::none(),
      "env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (or OpenMPI's, PMI's, Slurm's variables).\n\n"
      "timeout: seconds, the deadline of init and of each operation (RR_TIMEOUT_MS); chunk_bytes, "
      "pipeline_depth, check_arguments: as RR_CHUNK_BYTES, RR_PIPELINE_DEPTH, RR_CHECK_ARGUMENTS. None "
      "takes the environment variable or the default.");
  comm.def_static("init",
      [](const std::string& url, int nranks, int rank, std::optional<double> timeout,
         std::optional<long long> chunk_bytes, std::optional<int> pipeline_depth, std::optional<bool> check_arguments) {
        rrConfig_t config = make_config("init", timeout, chunk_bytes, pipeline_depth, check_arguments);
        return init_comm([&](rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), nranks, rank, &config); });
      },
      py::arg("url"), py::arg("nranks") = -1, py::arg("rank") = -1, py::kw_only(), py::arg("timeout") = py::none(),
      py::arg("chunk_bytes") = py::none(), py::arg("pipeline_depth") = py::none(),
      py::arg("check_arguments") = py::none(),
      "rrCommInitUrl: 'env://', 'tcp://host:port' (rank 0 serves the rendezvous there) or "
      "'file:///path' (a new file per job). nranks or rank < 0 take WORLD_SIZE / RANK from the "
      "environment. Keywords as from_env's.");
  comm.def_static("init_rank",
      [](int nranks, py::object unique_id, int rank, std::optional<double> timeout,
         std::optional<long long> chunk_bytes, std::optional<int> pipeline_depth, std::optional<bool> check_arguments) {
        rrConfig_t config = make_config("init_rank", timeout, chunk_bytes, pipeline_depth, check_arguments);
        const rrUniqueId id = unique_id_of(unique_id);
        return init_comm([&](rrComm_t* c) { return rrCommInitRankConfig(c, nranks, id, rank, &config); });
      },
      py::arg("nranks"), py::arg("unique_id"), py::arg("rank"), py::kw_only(), py::arg("timeout") = py::none(),
      py::arg("chunk_bytes") = py::none(), py::arg("pipeline_depth") = py::none(),
      py::arg("check_arguments") = py::none(),
      "rrCommInitRankConfig, as NCCL: every rank passes the UniqueId that ringreduce.get_unique_id() "
      "made (in one process, which serves the rendezvous). Keywords as from_env's.");

  comm.def_property_readonly("rank", [](const CommState& s) { return s.rank; }, "This rank, 0 .. size-1.")
      .def_property_readonly("size", [](const CommState& s) { return s.size; }, "The number of ranks.")
      .def_property(
          "timeout",
          [](CommState& s) {
            int ms = 0;
            s.call("timeout", [&](rrComm_t c) { return rrCommGetTimeout(c, &ms); });
            return ms / 1000.0;
          },
          [](CommState& s, double seconds) {
            const int ms = timeout_ms_of("timeout", seconds);
            s.call("timeout", [&](rrComm_t c) { return rrCommSetTimeout(c, ms); });
          },
          "Seconds: the deadline of each operation called from now on (rrCommSetTimeout, as "
          "torch.distributed.set_timeout); init's timeout= until set. A request keeps the one in force when "
          "its call was made.")
      .def_property_readonly("closed", [](const CommState& s) { return s.comm.load() == nullptr; },
                             "Whether destroy() or abort() ended it.")
      .def("__repr__", [](const CommState& s) {
        return "<ringreduce.Comm rank " + std::to_string(s.rank) + " of " + std::to_string(s.size) +
               (s.comm.load() ? ">" : ", closed>");
      });

  comm.def("split", [](CommState& s, int color, int key) -> std::optional<CommPtr> {
        rrComm_t child = nullptr;
        s.call("split", [&](rrComm_t c) { return rrCommSplit(c, color, key, &child, nullptr); });
        if (!child) return std::nullopt;
        return adopt(child);
      }, py::arg("color"), py::arg("key") = 0,
      "rrCommSplit, as MPI_Comm_split (collective): ranks passing the same color >= 0 form a new Comm, "
      "ranked by key (ties by rank); a negative color gets None. The new communicator has this one's "
      "settings and its own transport.")
      .def("shrink", [](CommState& s, std::optional<std::vector<int>> exclude) -> CommPtr {
        rrComm_t child = nullptr;
        std::vector<int> excluded;
        if (exclude) {
          excluded = *exclude;
          std::sort(excluded.begin(), excluded.end());
          s.call("shrink", [&](rrComm_t c) {
            return rrCommShrink(c, exclude->data(), static_cast<int>(exclude->size()), &child, nullptr);
          });
        } else {
          excluded.resize(static_cast<size_t>(s.size));
          int n = 0;
          s.call("shrink", [&](rrComm_t c) { return rrCommShrinkFailed(c, &child, excluded.data(), &n, nullptr); });
          excluded.resize(static_cast<size_t>(n));
        }
        CommPtr made = adopt(child);
        made->excluded = std::move(excluded);
        return made;
      }, py::arg("exclude") = py::none(),
      "ULFM's MPI_Comm_shrink: a new Comm of the ranks still here, ranked in the old order, over connections "
      "of their own (no store). With `exclude` (rrCommShrink) the ranks not in it make it (each passing the "
      "same list; the excluded ones, dead or alive, do not call). Without (rrCommShrinkFailed) every rank "
      "still alive calls, and they agree among themselves which failed: a rank the transport reports gone, "
      "or one silent for the timeout. The new Comm's `excluded` names the old ranks left out. Works after a "
      "failure or revoke() broke this one (the usual case: revoke(), then shrink()); destroy this one after.")
      .def("unique_id", [](CommState& s) -> py::object {
        rrUniqueId id{};
        s.call("unique_id", [&](rrComm_t c) { return rrCommGetUniqueId(c, &id); });
        const py::bytes raw(id.internal, sizeof(id.internal));
        return py::module_::import("ringreduce.unique_id").attr("UniqueId")(raw);
      },
      "rrCommGetUniqueId (collective): rank 0 makes a unique id (its process serves the rendezvous) and every "
      "rank gets it: hand it to the new processes, which join with Comm.init_rank(nranks, id, rank) while "
      "every rank here calls grow(nranks, id).")
      .def("grow", [](CommState& s, int nranks, py::object unique_id) -> CommPtr {
        const rrUniqueId id = unique_id_of(unique_id);
        rrComm_t child = nullptr;
        s.call("grow", [&](rrComm_t c) { return rrCommGrow(c, nranks, id, &child, nullptr); });
        return adopt(child);
      }, py::arg("nranks"), py::arg("unique_id"),
      "rrCommGrow (as NCCL's ncclCommGrow): every rank here passes the same nranks (more than size) and "
      "unique_id (from unique_id()); the new processes call Comm.init_rank(nranks, unique_id, rank) with "
      "ranks from size up. Returns the new Comm: these ranks at their numbers, the new ones after, this "
      "one's settings. This Comm stays as it was.")
      .def_property_readonly("excluded", [](const CommState& s) { return s.excluded; },
                             "The old ranks the shrink that made this Comm left out, ascending (empty otherwise).")
      .def("destroy", [](CommState& s) { s.destroy(true); },
           "rrCommDestroy. First waits for this communicator's requests still in flight, each at most the "
           "communicator's timeout (their errors stay on their Request; abort() waits for none). Calls "
           "afterwards raise InvalidUsageError; a second destroy() does nothing.")
      .def("abort", &CommState::abort,
           "rrCommAbort: ends the communicator now, whatever its peers do. Calls running on it in other "
           "threads raise InvalidUsageError ('aborted') within about 10 ms, its requests finish with that "
           "error, and the peers' calls fail naming this rank. Does nothing if already ended.")
      .def("revoke", [](CommState& s) { s.call("revoke", [](rrComm_t c) { return rrCommRevoke(c); }); },
           "rrCommRevoke (ULFM's MPI_Comm_revoke), from any thread: every pending and later call on this "
           "communicator raises RevokedError, here and on every peer (they are told, and each that hears "
           "passes it on), wherever it waits. The communicator stays open for queries and destroy(). "
           "Revoking twice, or after a failure broke it, is fine.")
      .def("async_error", [](CommState& s) -> py::object {
        rrResult_t err = rrSuccess;
        std::string message;
        s.call("async_error", [&](rrComm_t c) {
          rrResult_t r = rrCommGetAsyncError(c, &err);
          if (r == rrSuccess && err != rrSuccess) message = rrGetLastError(c);
          return r;
        });
        if (err == rrSuccess) return py::none();
        return py::module_::import("ringreduce.errors").attr("from_result")(static_cast<int>(err), message);
      }, "rrCommGetAsyncError: None while the communicator is healthy, else the error (not raised) that "
         "broke it, whether a call here met it or a peer reported it.")
      .def("bytes_sent", [](CommState& s, int peer) {
        uint64_t sent = 0, received = 0;
        s.call("bytes_sent", [&](rrComm_t c) { return rrCommGetPeerBytes(c, peer, &sent, &received); });
        return sent;
      }, py::arg("peer"), "Payload bytes this rank has sent to `peer` since the communicator was made.")
      .def("bytes_received", [](CommState& s, int peer) {
        uint64_t sent = 0, received = 0;
        s.call("bytes_received", [&](rrComm_t c) { return rrCommGetPeerBytes(c, peer, &sent, &received); });
        return received;
      }, py::arg("peer"), "Payload bytes this rank has received from `peer` since the communicator was made.")
      .def("dump", [](CommState& s) { s.call("dump", [](rrComm_t c) { return rrCommDump(c); }); },
           "rrCommDump: writes this rank's view of the communicator (operations, what a running one waits "
           "for) to stderr.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](CommState& s, py::object type, py::object, py::object) {
        if (type.is_none()) s.destroy(true);
        else s.abort();  // the peers hear at once instead of waiting out the timeout
        return false;
      }, py::arg("exc_type"), py::arg("exc"), py::arg("tb"),
      "Destroys the communicator, or aborts it when the block raised.");

  return comm;
}

}  // namespace ringreduce_core
