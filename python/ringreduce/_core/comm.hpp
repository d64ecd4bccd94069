#pragma once
// ringreduce.Comm's state: the communicator handle, its rank and size, the
// lock that keeps destroy() from freeing it under a running call, and the
// requests in flight that destroy() and abort() finish first (rrCommDestroy
// refuses a communicator with requests in flight).

#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "errors.hpp"
#include "request.hpp"

namespace ringreduce_core {

namespace py = pybind11;

struct CommState {
  std::atomic<rrComm_t> comm{nullptr};
  int rank = -1;
  int size = 0;
  // Shared by every call, exclusive to destroy(): nothing frees the
  // communicator while a call is inside it. abort() takes the pointer away
  // without it, so that it interrupts the calls in flight.
  std::shared_mutex lifetime;
  std::atomic<const char*> closed_by{"destroyed (Comm.destroy)"};
  std::vector<std::shared_ptr<Pending>> pending;  // under the GIL
  std::vector<int> excluded;  // a shrink's: the old ranks it left out

  CommState(rrComm_t c, int r, int n) : comm(c), rank(r), size(n) {}
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  ~CommState();

  void forget(const std::shared_ptr<Pending>& p) {
    p->buffers.clear();
    p->arrays.clear();
    pending.erase(std::remove(pending.begin(), pending.end(), p), pending.end());
  }

  std::string closed_text(const char* call) const {
    return std::string(call) + ": the communicator was " + closed_by.load();
  }

  // Runs f(comm) without the GIL, under the lifetime lock; raises its error.
  template <typename F>
  void call(const char* what, F&& f) {
    rrResult_t r = rrSuccess;
    std::string message;
    {
      py::gil_scoped_release nogil;
      std::shared_lock<std::shared_mutex> lock(lifetime);
      rrComm_t c = comm.load(std::memory_order_acquire);
      if (!c) {
        r = rrInvalidUsage;
        message = closed_text(what);
      } else {
        r = f(c);
        if (r != rrSuccess) message = rrGetLastError(nullptr);  // this thread's: the call just made
      }
    }
    if (r != rrSuccess) raise_error(r, message);
  }

  void destroy(bool raise);
  void abort();
};

using CommClass = py::class_<CommState, CommPtr>;

// Adds Comm to `m` with its lifecycle: init, rank and size, split, destroy,
// abort, errors and counters, the context manager. collectives.cpp and
// point_to_point.cpp add the rest of its methods.
CommClass bind_comm(py::module_& m);

// A timeout in seconds as the engine's milliseconds (rounded up); raises
// ValueError naming `call` unless it is a positive number of seconds.
int timeout_ms_of(const char* call, double timeout);

}  // namespace ringreduce_core
