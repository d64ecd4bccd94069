#pragma once
// Non-blocking calls: what one keeps while in flight (its rrRequest_t, the
// buffers and arrays the engine still uses, its Status once finished), how it
// is tested or waited without the GIL, and ringreduce.Request, the object
// that hands it to Python.

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"

namespace ringreduce_core {

namespace py = pybind11;

struct CommState;  // comm.hpp
using CommPtr = std::shared_ptr<CommState>;

// A non-blocking call in flight: its request and the buffers it uses, kept
// until it finished. `busy` lets one thread at a time into rrTest / rrWait.
struct Pending {
  std::string what;
  rrRequest_t request = nullptr;
  std::mutex busy;
  std::atomic<bool> finished{false};
  rrResult_t result = rrSuccess;  // written under `busy` before `finished`
  std::string message;
  std::vector<Buffer> buffers;       // under the GIL
  std::vector<size_t> arrays;        // count / displacement arrays the call reads
  bool has_status = false;
  int source = -1;
  int tag = 0;
  size_t count = 0;
};

enum class Settle { kTest, kWait, kWaitFor };

// With the GIL. Tests or waits for `p` without it (kWaitFor: polls until
// `timeout_s` passed), forgets it once finished and, with `raise`, raises
// its error; kWaitFor raises TimeoutError when time ran out. Returns whether
// it finished (false also when another thread is inside it, kTest only).
bool settle(CommState& state, const std::shared_ptr<Pending>& p, Settle how, double timeout_s, bool raise);

// ringreduce.Request: one Pending, and its communicator kept alive for it.
class Request {
 public:
  Request(CommPtr state, std::shared_ptr<Pending> pending) : state_(std::move(state)), pending_(std::move(pending)) {}

  bool test();
  void wait(std::optional<double> timeout);

  bool done() const { return pending_->finished.load(std::memory_order_acquire); }
  const Pending& pending() const { return *pending_; }
  std::string repr() const {
    return "<ringreduce.Request " + pending_->what + (done() ? ", finished>" : ", in flight>");
  }

 private:
  CommPtr state_;
  std::shared_ptr<Pending> pending_;
};

// ringreduce.Status(source, tag, count): a point-to-point message.
py::object make_status(int source, int tag, size_t count);

// Adds Status (a named tuple) and Request to `m`.
void bind_request(py::module_& m);

}  // namespace ringreduce_core
