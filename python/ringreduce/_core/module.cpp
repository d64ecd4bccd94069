// _core: the NumPy / buffer-protocol binding of ringreduce's C API
// (ringreduce.Comm, ringreduce.Request). A client of the public header only.
//
// Thin by design: each method turns its Python arguments into the C call's
// (a buffer's pointer, element count and rrDataType_t; an op; a root), lets
// go of the GIL around every engine call that may wait, and raises the
// ringreduce.errors class of a failed call with rrGetLastError's text. The
// only state kept here is what Python's object model needs: the buffers a
// non-blocking call still uses, and which requests a communicator has in
// flight (so destroy() can finish them first, as rrCommDestroy asks).
//
// buffers.cpp converts buffers, ops.cpp ops; request.cpp and comm.cpp hold
// Request and Comm; collectives.cpp and point_to_point.cpp add Comm's
// methods. This file assembles the module.

#include <pybind11/pybind11.h>

#include <string>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"
#include "collectives.hpp"
#include "comm.hpp"
#include "errors.hpp"
#include "point_to_point.hpp"
#include "request.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  using namespace ringreduce_core;

  m.doc() =
      "ringreduce's C API for Python: the buffer-protocol binding (mpi4py's shape).\n\n"
      "Use it through the ringreduce package (ringreduce.Comm, ringreduce.IN_PLACE, ...).";

  bind_in_place(m);
  m.attr("UNIQUE_ID_BYTES") = static_cast<int>(RR_UNIQUE_ID_BYTES);

  m.def("get_version", [] {
    int v = 0;
    if (rrGetVersion(&v) != rrSuccess) raise_error(rrInternalError, rrGetLastError(nullptr));
    return v;
  }, "rrGetVersion: the library's version as major * 10000 + minor * 100 + patch.");
  m.def("error_string", [](int result) { return std::string(rrGetErrorString(static_cast<rrResult_t>(result))); },
        py::arg("result"), "rrGetErrorString: the fixed text of a result code.");
  m.def("_get_unique_id", [] {
    rrUniqueId id{};
    rrResult_t r;
    std::string message;
    {
      py::gil_scoped_release nogil;
      r = rrGetUniqueId(&id);
      if (r != rrSuccess) message = rrGetLastError(nullptr);
    }
    if (r != rrSuccess) raise_error(r, message);
    return py::bytes(id.internal, sizeof id.internal);
  }, "rrGetUniqueId, as bytes (ringreduce.get_unique_id wraps it in a UniqueId).");

  // Request before Comm, so that Comm's signatures name it.
  bind_request(m);
  CommClass comm = bind_comm(m);
  bind_collectives(comm);
  bind_point_to_point(m, comm);
}
