// Testing and waiting for non-blocking calls, and ringreduce.Request.

#include "request.hpp"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "comm.hpp"
#include "errors.hpp"

namespace ringreduce_core {

namespace {

// Without the GIL: tests or waits for `p` (kWaitFor: polls until `timeout_s`
// passed). Returns false when another thread is inside it (kTest only) or
// kWaitFor ran out of time.
bool finish_nogil(Pending& p, Settle how, double timeout_s) {
  std::unique_lock<std::mutex> lock(p.busy, std::defer_lock);
  if (how == Settle::kTest) {
    if (!lock.try_lock()) return false;
  } else {
    lock.lock();
  }
  if (p.finished.load(std::memory_order_acquire)) return true;
  int done = 0;
  rrResult_t r = rrSuccess;
  auto status_call = [&](bool block) {
    if (p.has_status) {
      rrStatus_t status{};
      if (block) {
        r = rrWaitStatus(p.request, &status);
        done = 1;
      } else {
        r = rrTestStatus(p.request, &done, &status);
      }
      if (r == rrSuccess && done) {
        p.source = status.source;
        p.tag = status.tag;
        p.count = static_cast<size_t>(status.count);
      }
      return;
    }
    if (block) {
      r = rrWait(p.request);
      done = 1;
    } else {
      r = rrTest(p.request, &done);
    }
  };
  if (how == Settle::kWait) {
    status_call(true);
  } else if (how == Settle::kTest) {
    status_call(false);
  } else {
    using Clock = std::chrono::steady_clock;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (int polls = 0;; ++polls) {
      status_call(false);
      if (r != rrSuccess || done) break;
      if (Clock::now() >= deadline) return false;
      // Spin briefly (a request about to finish), then nap, longer the longer it takes.
      if (polls < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 50 : 500));
    }
  }
  if (r != rrSuccess) {
    // A failed request is released by the engine, as a finished one.
    p.result = r;
    p.message = rrGetLastError(nullptr);
    done = 1;
  }
  if (!done) return false;
  p.request = nullptr;
  p.finished.store(true, std::memory_order_release);
  return true;
}

// ringreduce.Status(source, tag, count): a named tuple, made at import (bind_request).
py::object& status_type() {
  static py::object* type = new py::object();  // leaked: lives as long as the module
  return *type;
}

}  // namespace

bool settle(CommState& state, const std::shared_ptr<Pending>& p, Settle how, double timeout_s, bool raise) {
  bool finished;
  {
    py::gil_scoped_release nogil;
    finished = finish_nogil(*p, how, timeout_s);
  }
  if (!finished) {
    if (how == Settle::kWaitFor && raise) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
      raise_error(rrTimeout, "Request.wait: " + p->what + " did not finish within " + seconds +
                                 " s; it is still in flight (wait for or test it again)");
    }
    return false;
  }
  state.forget(p);
  if (raise && p->result != rrSuccess) raise_error(p->result, p->message);
  return true;
}

bool Request::test() { return settle(*state_, pending_, Settle::kTest, 0, true); }

void Request::wait(std::optional<double> timeout) {
  if (!timeout) {
    settle(*state_, pending_, Settle::kWait, 0, true);
    return;
  }
  if (!(*timeout >= 0) || !std::isfinite(*timeout)) {
    invalid_argument("Request.wait: timeout=" + py::str(py::float_(*timeout)).cast<std::string>() +
                     " must be a finite number of seconds >= 0, or None");
  }
  settle(*state_, pending_, Settle::kWaitFor, *timeout, true);
}

py::object make_status(int source, int tag, size_t count) { return status_type()(source, tag, count); }

void bind_request(py::module_& m) {
  status_type() = py::module_::import("collections").attr("namedtuple")("Status", py::make_tuple("source", "tag", "count"),
                                                                         py::arg("module") = "ringreduce");
  status_type().attr("__doc__") =
      "A point-to-point message: source (the sender's rank; for a send, this rank), tag, count (elements).";
  m.attr("Status") = status_type();

  py::class_<Request>(m, "Request",
                      "A non-blocking call in flight (rrRequest_t). It keeps the call's buffers alive until it "
                      "finished; a Request dropped unfinished leaves them with its communicator, which "
                      "finishes it at destroy().")
      .def("test", &Request::test,
           "True once the call finished (then its buffers are yours again), False while it runs. Raises "
           "the call's error if it failed.")
      .def("wait", &Request::wait, py::arg("timeout") = py::none(),
           "Waits until the call finished; raises its error if it failed.\n\n"
           "timeout: seconds, or None to wait as long as the communicator's own timeout allows. When it "
           "expires, raises ringreduce.TimeoutError and the request stays valid: wait or test again.")
      .def_property_readonly("done", &Request::done, "Whether the call finished (test() or wait() saw it end).")
      .def_property_readonly("status", [](const Request& r) -> py::object {
        if (!r.done() || !r.pending().has_status) return py::none();
        return make_status(r.pending().source, r.pending().tag, r.pending().count);
      }, "A finished point-to-point request's Status(source, tag, count): for a receive, the rank that "
         "sent (the one ANY_SOURCE matched), the message's tag and its element count. None before it "
         "finished, and for collectives.")
      .def_property_readonly("source", [](const Request& r) -> std::optional<int> {
        if (!r.done() || !r.pending().has_status) return std::nullopt;
        return r.pending().source;
      }, "status.source: a finished receive's sender (the rank ANY_SOURCE matched); None otherwise.")
      .def("__repr__", &Request::repr);
}

}  // namespace ringreduce_core
