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

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// Ops the engine may not have yet: bitwise ones exist once rrNumOps says so.
constexpr int kOpBand = 5;
constexpr int kOpBor = 6;
constexpr int kOpBxor = 7;
constexpr bool kHasBitwiseOps = static_cast<int>(rrNumOps) > kOpBxor;
constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
constexpr int kOpCount = 8;

#ifdef RR_ANY_SOURCE
constexpr bool kHasTags = true;
#else
constexpr bool kHasTags = false;
#endif

// rrAllToAllv has no macro of its own: fallbacks declared beside the
// header's functions tell whether it has them. They take every argument
// through a user-defined conversion, so the real declaration, where there is
// one, is always the better match.
namespace fallback {
struct Absent {
  operator rrResult_t() const { return rrInvalidUsage; }
};
struct Anything {
  template <typename T>
  Anything(T&&) {}  // NOLINT: converts from anything, on purpose
};
inline Absent rrAllToAllv(Anything, Anything, Anything, Anything, Anything, Anything, Anything, Anything,
                          Anything) {
  return {};
}
inline Absent rrAllToAllvAsync(Anything, Anything, Anything, Anything, Anything, Anything, Anything, Anything,
                               Anything) {
  return {};
}
}  // namespace fallback

constexpr bool has_alltoallv() {
  using namespace fallback;
  return !std::is_same_v<decltype(rrAllToAllv(std::declval<const void*>(), std::declval<const size_t*>(),
                                              std::declval<const size_t*>(), std::declval<void*>(),
                                              std::declval<const size_t*>(), std::declval<const size_t*>(),
                                              std::declval<rrDataType_t>(), std::declval<rrComm_t>(),
                                              std::declval<void*>())),
                         fallback::Absent>;
}
constexpr bool kHasAllToAllv = has_alltoallv();

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// ---- errors ---------------------------------------------------------------

// Raises ringreduce.errors' class for `result`, carrying `message`.
[[noreturn]] void raise_error(rrResult_t result, const std::string& message) {
  py::object error = py::module_::import("ringreduce.errors").attr("from_result")(static_cast<int>(result), message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

[[noreturn]] void invalid_argument(const std::string& message) { raise_error(rrInvalidArgument, message); }
[[noreturn]] void invalid_usage(const std::string& message) { raise_error(rrInvalidUsage, message); }

std::string type_name(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

// ---- buffers --------------------------------------------------------------

// The engine's element type of a buffer. numpy bool travels as uint8 and
// reduces logically (resolve_op).
struct Element {
  rrDataType_t dtype = rrUint8;
  bool is_bool = false;
  bool is_float = false;
  const char* name = "uint8";
};

constexpr const char* kSupportedTypes =
    "int8, uint8, int32, uint32, int64, uint64, float16, float32, float64 and bool";

// A struct-module format (PEP 3118) and item size -> Element. Only native
// byte order: the engine reduces in the machine's.
bool element_of(const char* format, Py_ssize_t itemsize, Element* out) {
  std::string f = format ? format : "B";
  if (!f.empty() && std::strchr("@=<>!", f[0])) {
    const bool big = f[0] == '>' || f[0] == '!';
    const bool little_host = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if (itemsize > 1 && ((big && little_host) || (f[0] == '<' && !little_host))) return false;
    f.erase(0, 1);
  }
  if (f.size() != 1) return false;
  const char c = f[0];
  Element e;
  switch (c) {
    case '?': e = {rrUint8, true, false, "bool"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'b': e = {rrInt8, false, false, "int8"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'B': case 'c': e = {rrUint8, false, false, "uint8"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'e': e = {rrFloat16, false, true, "float16"}; return itemsize == 2 ? (*out = e, true) : false;
    case 'f': e = {rrFloat32, false, true, "float32"}; return itemsize == 4 ? (*out = e, true) : false;
    case 'd': e = {rrFloat64, false, true, "float64"}; return itemsize == 8 ? (*out = e, true) : false;
    case 'i': case 'l': case 'q': case 'n':
      if (itemsize == 4) *out = {rrInt32, false, false, "int32"};
      else if (itemsize == 8) *out = {rrInt64, false, false, "int64"};
      else return false;
      return true;
    case 'I': case 'L': case 'Q': case 'N':
      if (itemsize == 4) *out = {rrUint32, false, false, "uint32"};
      else if (itemsize == 8) *out = {rrUint64, false, false, "uint64"};
      else return false;
      return true;
    default: return false;
  }
}

// A C-contiguous buffer held through the buffer protocol for as long as this
// object lives (which also keeps e.g. a bytearray from being resized under
// the engine). Released with the GIL held, as PyBuffer_Release needs.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept : view_(other.view_), held_(other.held_), element_(other.element_), count_(other.count_) {
    other.held_ = false;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      view_ = other.view_;
      held_ = other.held_;
      element_ = other.element_;
      count_ = other.count_;
      other.held_ = false;
    }
    return *this;
  }
  ~Buffer() { release(); }

  // `call` and `arg` name the method and argument in error messages.
  static Buffer acquire(py::handle obj, const char* call, const char* arg, bool writable) {
    Buffer b;
    if (obj.is_none()) {
      invalid_argument(std::string(call) + ": " + arg + " is None; pass a numpy array or another object with a " +
                       (writable ? "writable " : "") + "buffer");
    }
    if (PyObject_GetBuffer(obj.ptr(), &b.view_, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      invalid_argument(std::string(call) + ": " + arg + " (" + type_name(obj) +
                       ") does not support the buffer protocol; pass a numpy array, bytearray or memoryview");
    }
    b.held_ = true;
    if (writable && b.view_.readonly) {
      invalid_argument(std::string(call) + ": " + arg + " (" + type_name(obj) +
                       ") is read-only; the call writes its result there");
    }
    if (!b.c_contiguous()) {
      invalid_argument(std::string(call) + ": " + arg + " is not C-contiguous (strides " + b.strides_text() +
                       "); pass numpy.ascontiguousarray(" + arg + "), or a contiguous copy, instead");
    }
    if (!element_of(b.view_.format, b.view_.itemsize, &b.element_)) {
      invalid_argument(std::string(call) + ": " + arg + " has elements of format '" +
                       (b.view_.format ? b.view_.format : "B") + "' (" + std::to_string(b.view_.itemsize) +
                       " bytes), which ringreduce has no type for; supported: " + kSupportedTypes +
                       " (native byte order)");
    }
    b.count_ = b.view_.itemsize > 0 ? static_cast<size_t>(b.view_.len / b.view_.itemsize) : 0;
    return b;
  }

  void* data() const { return view_.buf; }
  // The address `elements` elements in.
  void* at(size_t elements) const { return static_cast<char*>(view_.buf) + elements * static_cast<size_t>(view_.itemsize); }
  size_t count() const { return count_; }
  const Element& element() const { return element_; }
  bool held() const { return held_; }

  // Gives up the view without releasing it (at interpreter exit, when the
  // engine may still write into it and nothing may be freed).
  void leak() { held_ = false; }

 private:
  bool c_contiguous() const {
    if (view_.suboffsets) return false;
    if (view_.len == 0 || !view_.strides) return true;
    Py_ssize_t expected = view_.itemsize;
    for (int i = view_.ndim - 1; i >= 0; --i) {
      if (view_.shape[i] != 1 && view_.strides[i] != expected) return false;
      expected *= view_.shape[i];
    }
    return true;
  }
  std::string strides_text() const {
    std::string s = "(";
    for (int i = 0; i < view_.ndim; ++i) s += (i ? ", " : "") + std::to_string(view_.strides[i]);
    return s + (view_.ndim == 1 ? ",)" : ")");
  }
  void release() {
    if (held_) PyBuffer_Release(&view_);
    held_ = false;
  }

  Py_buffer view_{};
  bool held_ = false;
  Element element_;
  size_t count_ = 0;
};

bool is_in_place(py::handle obj);  // defined with the IN_PLACE object below

void same_element(const char* call, const Buffer& send, const Buffer& recv) {
  const Element& a = send.element();
  const Element& b = recv.element();
  if (a.dtype != b.dtype || a.is_bool != b.is_bool) {
    invalid_argument(std::string(call) + ": sendbuf holds " + a.name + " but recvbuf holds " + b.name +
                     "; both must have the same element type");
  }
}

// count = n * block; the block size, or a clear error naming `arg`.
size_t blocks_of(const char* call, const char* arg, const Buffer& b, int n) {
  if (b.count() % static_cast<size_t>(n) != 0) {
    invalid_argument(std::string(call) + ": " + arg + " has " + std::to_string(b.count()) +
                     " elements, which do not split into " + std::to_string(n) + " equal blocks (one per rank)");
  }
  return b.count() / static_cast<size_t>(n);
}

void expect_count(const char* call, const char* arg, const Buffer& b, size_t expected, const std::string& why) {
  if (b.count() != expected) {
    invalid_argument(std::string(call) + ": " + arg + " has " + std::to_string(b.count()) + " elements but " +
                     std::to_string(expected) + " were expected (" + why + ")");
  }
}

// ---- ops ------------------------------------------------------------------

// An op given as an Op (any int) or by name -> the rrRedOp_t for this
// element type. numpy bool reduces logically on 0/1 bytes: or is max, and
// is min, xor is bxor.
rrRedOp_t resolve_op(py::handle op, const Element& e, const char* call) {
  int code = -1;
  if (py::isinstance<py::str>(op)) {
    std::string name = op.cast<std::string>();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    for (int i = 0; i < kOpCount; ++i) {
      if (name == kOpNames[i]) code = i;
    }
    if (code < 0) {
      invalid_argument(std::string(call) + ": op='" + op.cast<std::string>() +
                       "' is not an op; ops: sum, prod, max, min, avg, band, bor, bxor");
    }
  } else if (PyLong_Check(op.ptr())) {
    const long v = PyLong_AsLong(op.ptr());
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v >= kOpCount) {
      invalid_argument(std::string(call) + ": op=" + py::str(op).cast<std::string>() +
                       " is not an op (ringreduce.Op: 0 sum .. 7 bxor)");
    }
    code = static_cast<int>(v);
  } else {
    invalid_argument(std::string(call) + ": op must be a ringreduce.Op or its name, not " + type_name(op));
  }
  if (e.is_bool) {
    switch (code) {
      case rrSum: case rrMax: case kOpBor: return rrMax;   // or
      case rrProd: case rrMin: case kOpBand: return rrMin; // and
      case rrAvg:
        invalid_argument(std::string(call) + ": op=avg of a bool array is refused (bool reduces logically: "
                         "sum, max and bor are or; prod, min and band are and; bxor is xor)");
      default: break;  // bxor: the engine's, on 0/1 bytes
    }
  }
  const bool bitwise = code >= kOpBand;
  if (bitwise && e.is_float) {
    invalid_argument(std::string(call) + ": op=" + kOpNames[code] + " is for integer types; the buffers hold " +
                     e.name);
  }
  if (bitwise && !kHasBitwiseOps) {
    invalid_argument(std::string(call) + ": op=" + kOpNames[code] +
                     " needs an engine with bitwise ops; this libringreduce has sum, prod, max, min and avg");
  }
  return static_cast<rrRedOp_t>(code);
}

// ---- requests and communicators -------------------------------------------

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
#ifdef RR_ANY_SOURCE
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
#endif
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
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
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

// With the GIL. Settles `p` (see finish_nogil), forgets it once finished
// and raises its error; kWaitFor raises TimeoutError when time ran out.
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

using CommPtr = std::shared_ptr<CommState>;

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

class Request {
 public:
  Request(CommPtr state, std::shared_ptr<Pending> pending) : state_(std::move(state)), pending_(std::move(pending)) {}

  bool test() { return settle(*state_, pending_, Settle::kTest, 0, true); }

  void wait(std::optional<double> timeout) {
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

  bool done() const { return pending_->finished.load(std::memory_order_acquire); }
  const Pending& pending() const { return *pending_; }
  std::string repr() const {
    return "<ringreduce.Request " + pending_->what + (done() ? ", finished>" : ", in flight>");
  }

 private:
  CommPtr state_;
  std::shared_ptr<Pending> pending_;
};

// A call's C arguments, ready to run blocking (request == nullptr) or as a
// request, with the buffers it uses.
struct Prepared {
  std::vector<Buffer> buffers;
  std::vector<size_t> arrays;
  bool has_status = false;
  std::function<rrResult_t(rrComm_t, rrRequest_t*)> run;
};

void run_blocking(CommState& state, const char* what, Prepared& p) {
  state.call(what, [&](rrComm_t c) { return p.run(c, nullptr); });
}

Request run_async(const CommPtr& state, const char* what, Prepared& p) {
  rrRequest_t request = nullptr;
  state->call(what, [&](rrComm_t c) { return p.run(c, &request); });
  auto pending = std::make_shared<Pending>();
  pending->what = what;
  pending->request = request;
  pending->buffers = std::move(p.buffers);
  pending->arrays = std::move(p.arrays);
  pending->has_status = p.has_status;
  state->pending.push_back(pending);
  return Request(state, std::move(pending));
}

// ---- IN_PLACE and ANY_SOURCE ----------------------------------------------

struct InPlace {};
py::object& in_place_object() {
  static py::object* obj = nullptr;  // leaked: lives as long as the module
  if (!obj) obj = new py::object();
  return *obj;
}
bool is_in_place(py::handle obj) { return obj.is(in_place_object()); }

// ---- the collectives' argument conversion ---------------------------------

Prepared prep_allreduce(const CommState&, py::handle sendbuf, py::handle recvbuf, py::handle op, const char* call) {
  Prepared p;
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  const void* send_ptr = recv.data();
  if (!is_in_place(sendbuf)) {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
    same_element(call, send, recv);
    expect_count(call, "sendbuf", send, recv.count(), "as many as recvbuf");
    send_ptr = send.data();
    p.buffers.push_back(std::move(send));
  }
  const rrRedOp_t rop = resolve_op(op, recv.element(), call);
  const size_t count = recv.count();
  const rrDataType_t dt = recv.element().dtype;
  void* recv_ptr = recv.data();
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrAllReduceAsync(send_ptr, recv_ptr, count, dt, rop, c, r)
             : rrAllReduce(send_ptr, recv_ptr, count, dt, rop, c, nullptr);
  };
  return p;
}

Prepared prep_reduce_scatter(const CommState& st, py::handle sendbuf, py::handle recvbuf, py::handle op,
                             const char* call) {
  Prepared p;
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  const void* send_ptr;
  void* recv_ptr;
  size_t count;
  if (is_in_place(sendbuf)) {
    // recvbuf holds every rank's block; this rank's result lands in block `rank`.
    count = blocks_of(call, "recvbuf (IN_PLACE: every rank's block)", recv, st.size);
    send_ptr = recv.data();
    recv_ptr = recv.at(count * static_cast<size_t>(st.rank));
  } else {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
    same_element(call, send, recv);
    count = recv.count();
    expect_count(call, "sendbuf", send, count * static_cast<size_t>(st.size), "size * len(recvbuf): one block per rank");
    send_ptr = send.data();
    recv_ptr = recv.data();
    p.buffers.push_back(std::move(send));
  }
  const rrRedOp_t rop = resolve_op(op, recv.element(), call);
  const rrDataType_t dt = recv.element().dtype;
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrReduceScatterAsync(send_ptr, recv_ptr, count, dt, rop, c, r)
             : rrReduceScatter(send_ptr, recv_ptr, count, dt, rop, c, nullptr);
  };
  return p;
}

Prepared prep_allgather(const CommState& st, py::handle sendbuf, py::handle recvbuf, const char* call) {
  Prepared p;
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  const void* send_ptr;
  size_t count;
  if (is_in_place(sendbuf)) {
    // This rank's block is already in place, block `rank` of recvbuf.
    count = blocks_of(call, "recvbuf", recv, st.size);
    send_ptr = recv.at(count * static_cast<size_t>(st.rank));
  } else {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
    same_element(call, send, recv);
    count = send.count();
    expect_count(call, "recvbuf", recv, count * static_cast<size_t>(st.size), "size * len(sendbuf): one block per rank");
    send_ptr = send.data();
    p.buffers.push_back(std::move(send));
  }
  const rrDataType_t dt = recv.element().dtype;
  void* recv_ptr = recv.data();
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrAllGatherAsync(send_ptr, recv_ptr, count, dt, c, r)
             : rrAllGather(send_ptr, recv_ptr, count, dt, c, nullptr);
  };
  return p;
}

Prepared prep_broadcast(const CommState& st, py::handle sendbuf, py::handle recvbuf, int root, const char* call) {
  Prepared p;
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  const void* send_ptr = recv.data();
  // sendbuf is read on the root only; elsewhere it is ignored (None is fine).
  if (st.rank == root && !is_in_place(sendbuf)) {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf (on the root)", false);
    same_element(call, send, recv);
    expect_count(call, "sendbuf", send, recv.count(), "as many as recvbuf");
    send_ptr = send.data();
    p.buffers.push_back(std::move(send));
  }
  const size_t count = recv.count();
  const rrDataType_t dt = recv.element().dtype;
  void* recv_ptr = recv.data();
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrBroadcastAsync(send_ptr, recv_ptr, count, dt, root, c, r)
             : rrBroadcast(send_ptr, recv_ptr, count, dt, root, c, nullptr);
  };
  return p;
}

Prepared prep_reduce(const CommState& st, py::handle sendbuf, py::handle recvbuf, py::handle op, int root,
                     const char* call) {
  Prepared p;
  const bool is_root = st.rank == root;
  const void* send_ptr;
  void* recv_ptr = nullptr;
  size_t count;
  Element e;
  if (is_in_place(sendbuf)) {
    // recvbuf holds this rank's input (and, on the root, gets the result).
    Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf (IN_PLACE: the input)", true);
    send_ptr = recv.data();
    recv_ptr = recv.data();
    count = recv.count();
    e = recv.element();
    p.buffers.push_back(std::move(recv));
  } else {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
    send_ptr = send.data();
    count = send.count();
    e = send.element();
    if (is_root) {
      Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf (on the root)", true);
      same_element(call, send, recv);
      expect_count(call, "recvbuf", recv, count, "as many as sendbuf");
      recv_ptr = recv.data();
      p.buffers.push_back(std::move(recv));
    }
    p.buffers.push_back(std::move(send));
  }
  const rrRedOp_t rop = resolve_op(op, e, call);
  const rrDataType_t dt = e.dtype;
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrReduceAsync(send_ptr, recv_ptr, count, dt, rop, root, c, r)
             : rrReduce(send_ptr, recv_ptr, count, dt, rop, root, c, nullptr);
  };
  return p;
}

Prepared prep_gather(const CommState& st, py::handle sendbuf, py::handle recvbuf, int root, const char* call) {
  Prepared p;
  const bool is_root = st.rank == root;
  const void* send_ptr;
  void* recv_ptr = nullptr;
  size_t count;
  rrDataType_t dt;
  if (is_in_place(sendbuf)) {
    if (!is_root) {
      invalid_argument(std::string(call) + ": IN_PLACE is for the root only (its block of recvbuf); rank " +
                       std::to_string(st.rank) + " is not the root (root=" + std::to_string(root) + ")");
    }
    Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf (on the root)", true);
    count = blocks_of(call, "recvbuf", recv, st.size);
    recv_ptr = recv.data();
    send_ptr = recv.at(count * static_cast<size_t>(root));
    dt = recv.element().dtype;
    p.buffers.push_back(std::move(recv));
  } else {
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
    count = send.count();
    send_ptr = send.data();
    dt = send.element().dtype;
    if (is_root) {
      Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf (on the root)", true);
      same_element(call, send, recv);
      expect_count(call, "recvbuf", recv, count * static_cast<size_t>(st.size), "size * len(sendbuf): one block per rank");
      recv_ptr = recv.data();
      p.buffers.push_back(std::move(recv));
    }
    p.buffers.push_back(std::move(send));
  }
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrGatherAsync(send_ptr, recv_ptr, count, dt, root, c, r)
             : rrGather(send_ptr, recv_ptr, count, dt, root, c, nullptr);
  };
  return p;
}

Prepared prep_scatter(const CommState& st, py::handle sendbuf, py::handle recvbuf, int root, const char* call) {
  Prepared p;
  const bool is_root = st.rank == root;
  const void* send_ptr = nullptr;
  void* recv_ptr;
  size_t count;
  rrDataType_t dt;
  if (is_in_place(recvbuf)) {
    // As MPI's: on the root, IN_PLACE for recvbuf leaves its block in sendbuf.
    if (!is_root) {
      invalid_argument(std::string(call) + ": IN_PLACE (as recvbuf) is for the root only; rank " +
                       std::to_string(st.rank) + " is not the root (root=" + std::to_string(root) + ")");
    }
    Buffer send = Buffer::acquire(sendbuf, call, "sendbuf (on the root)", true);
    count = blocks_of(call, "sendbuf", send, st.size);
    send_ptr = send.data();
    recv_ptr = send.at(count * static_cast<size_t>(root));
    dt = send.element().dtype;
    p.buffers.push_back(std::move(send));
  } else {
    Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
    count = recv.count();
    recv_ptr = recv.data();
    dt = recv.element().dtype;
    // sendbuf is read on the root only; elsewhere it is ignored (None is fine).
    if (is_root) {
      Buffer send = Buffer::acquire(sendbuf, call, "sendbuf (on the root)", false);
      same_element(call, send, recv);
      expect_count(call, "sendbuf", send, count * static_cast<size_t>(st.size), "size * len(recvbuf): one block per rank");
      send_ptr = send.data();
      p.buffers.push_back(std::move(send));
    }
    p.buffers.push_back(std::move(recv));
  }
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrScatterAsync(send_ptr, recv_ptr, count, dt, root, c, r)
             : rrScatter(send_ptr, recv_ptr, count, dt, root, c, nullptr);
  };
  return p;
}

Prepared prep_alltoall(const CommState& st, py::handle sendbuf, py::handle recvbuf, const char* call) {
  Prepared p;
  if (is_in_place(sendbuf)) {
    invalid_argument(std::string(call) + ": IN_PLACE is not supported (the engine's all-to-all needs separate "
                     "buffers); pass sendbuf and recvbuf");
  }
  Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  same_element(call, send, recv);
  expect_count(call, "recvbuf", recv, send.count(), "as many as sendbuf");
  const size_t count = blocks_of(call, "sendbuf", send, st.size);
  const void* send_ptr = send.data();
  void* recv_ptr = recv.data();
  const rrDataType_t dt = send.element().dtype;
  p.buffers.push_back(std::move(send));
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return r ? rrAllToAllAsync(send_ptr, recv_ptr, count, dt, c, r)
             : rrAllToAll(send_ptr, recv_ptr, count, dt, c, nullptr);
  };
  return p;
}

// Per-rank counts and displacements (in elements; displacements default to
// the counts' running sum), each block inside its buffer.
std::vector<size_t> per_rank(const CommState& st, const char* call, const char* arg, py::handle seq) {
  std::vector<size_t> v;
  try {
    for (py::handle item : py::iter(seq)) {
      const long long x = item.cast<long long>();
      if (x < 0) invalid_argument(std::string(call) + ": " + arg + " holds " + std::to_string(x) + " (< 0)");
      v.push_back(static_cast<size_t>(x));
    }
  } catch (py::cast_error&) {
    invalid_argument(std::string(call) + ": " + arg + " must be a sequence of ints");
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    invalid_argument(std::string(call) + ": " + arg + " must be a sequence of ints, not " + type_name(seq));
  }
  if (v.size() != static_cast<size_t>(st.size)) {
    invalid_argument(std::string(call) + ": " + arg + " has " + std::to_string(v.size()) + " entries; one per rank (" +
                     std::to_string(st.size) + ") is needed");
  }
  return v;
}

void fit_blocks(const char* call, const char* buf_name, const Buffer& b, const std::vector<size_t>& counts,
                const std::vector<size_t>& displs) {
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    if (displs[i] > b.count() || counts[i] > b.count() - displs[i]) {
      invalid_argument(std::string(call) + ": block " + std::to_string(i) + " (" + std::to_string(counts[i]) +
                       " elements at " + std::to_string(displs[i]) + ") does not fit in " + buf_name + " (" +
                       std::to_string(b.count()) + " elements)");
    }
  }
}

Prepared prep_alltoallv(const CommState& st, py::handle sendbuf, py::handle recvbuf, py::handle sendcounts,
                        py::handle recvcounts, py::handle sdispls, py::handle rdispls, const char* call) {
  Prepared p;
  if (is_in_place(sendbuf)) {
    invalid_argument(std::string(call) + ": IN_PLACE is not supported; pass sendbuf and recvbuf");
  }
  Buffer send = Buffer::acquire(sendbuf, call, "sendbuf", false);
  Buffer recv = Buffer::acquire(recvbuf, call, "recvbuf", true);
  same_element(call, send, recv);
  auto running_sum = [](const std::vector<size_t>& counts) {
    std::vector<size_t> d(counts.size());
    size_t at = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      d[i] = at;
      at += counts[i];
    }
    return d;
  };
  std::vector<size_t> sc = per_rank(st, call, "sendcounts", sendcounts);
  std::vector<size_t> rc = per_rank(st, call, "recvcounts", recvcounts);
  std::vector<size_t> sd = sdispls.is_none() ? running_sum(sc) : per_rank(st, call, "sdispls", sdispls);
  std::vector<size_t> rd = rdispls.is_none() ? running_sum(rc) : per_rank(st, call, "rdispls", rdispls);
  fit_blocks(call, "sendbuf", send, sc, sd);
  fit_blocks(call, "recvbuf", recv, rc, rd);
  const size_t n = static_cast<size_t>(st.size);
  p.arrays.reserve(4 * n);
  for (const auto* v : {&sc, &sd, &rc, &rd}) p.arrays.insert(p.arrays.end(), v->begin(), v->end());
  const size_t* a = p.arrays.data();  // stays put: the vector is moved, never grown, after this
  const void* send_ptr = send.data();
  void* recv_ptr = recv.data();
  const rrDataType_t dt = send.element().dtype;
  p.buffers.push_back(std::move(send));
  p.buffers.push_back(std::move(recv));
  p.run = [=](rrComm_t c, rrRequest_t* r) -> rrResult_t {
    using namespace fallback;  // never called where the header lacks them: not bound then
    return r ? rrAllToAllvAsync(send_ptr, a, a + n, recv_ptr, a + 2 * n, a + 3 * n, dt, c, r)
             : rrAllToAllv(send_ptr, a, a + n, recv_ptr, a + 2 * n, a + 3 * n, dt, c, static_cast<void*>(nullptr));
  };
  return p;
}

// ---- point-to-point -------------------------------------------------------

// rrGroupStart / rrGroupEnd nesting on this thread, and the buffers of the
// sends and receives the group holds until rrGroupEnd posts them.
struct GroupState {
  int depth = 0;
  std::vector<Buffer> buffers;
};
GroupState& group_state() {
  // Heap, never destroyed: a thread that exits inside a group leaks its
  // views instead of releasing them without the GIL.
  thread_local GroupState* g = new GroupState();
  return *g;
}

// Tags other than 0 need the engine's tagged calls; their range is the engine's to check.
void check_tag(const char* call, int tag) {
  if (tag != 0 && !kHasTags) {
    invalid_usage(std::string(call) + ": tag=" + std::to_string(tag) +
                  " needs an engine with tagged point-to-point (rrIsendTag); this libringreduce has only tag 0");
  }
}

// ringreduce.Status(source, tag, count): a named tuple, made at import.
py::object& status_type() {
  static py::object* type = new py::object();  // leaked: lives as long as the module
  return *type;
}
py::object make_status(int source, int tag, size_t count) { return status_type()(source, tag, count); }

Prepared prep_p2p(bool is_send, py::handle buf, int peer, int tag, const char* call) {
  check_tag(call, tag);
  Prepared p;
  Buffer b = Buffer::acquire(buf, call, "buf", !is_send);
  void* ptr = b.data();
  const size_t count = b.count();
  const rrDataType_t dt = b.element().dtype;
  p.buffers.push_back(std::move(b));
#ifdef RR_ANY_SOURCE
  p.has_status = true;
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return is_send ? rrIsendTag(ptr, count, dt, peer, tag, c, r) : rrIrecvTag(ptr, count, dt, peer, tag, c, r);
  };
#else
  (void)tag;
  p.run = [=](rrComm_t c, rrRequest_t* r) {
    return is_send ? rrIsend(ptr, count, dt, peer, c, r) : rrIrecv(ptr, count, dt, peer, c, r);
  };
#endif
  return p;
}

// A blocking send or receive: rrSend / rrRecv (which a group defers), or,
// for a tagged or any-source one outside a group, the request form waited at
// once. Returns the Status of the message.
py::object p2p_blocking(const CommPtr& st, bool is_send, py::handle buf, int peer, int tag) {
  const char* call = is_send ? "send" : "recv";
  check_tag(call, tag);
  GroupState& group = group_state();
  const bool tagged = kHasTags && (tag != 0 || peer < 0);
  if (tagged) {
    if (group.depth > 0) {
      invalid_usage(std::string(call) + ": a tagged or any-source " + call +
                    " cannot be grouped (rrGroupStart); post it with i" + call + " instead");
    }
    Prepared p = prep_p2p(is_send, buf, peer, tag, call);
    Request request = run_async(st, call, p);
    request.wait(std::nullopt);
    const Pending& done = request.pending();
    return make_status(done.source, done.tag, done.count);
  }
  Buffer b = Buffer::acquire(buf, call, "buf", !is_send);
  void* ptr = b.data();
  const size_t count = b.count();
  const rrDataType_t dt = b.element().dtype;
  st->call(call, [&](rrComm_t c) {
    return is_send ? rrSend(ptr, count, dt, peer, c, nullptr) : rrRecv(ptr, count, dt, peer, c, nullptr);
  });
  // Inside a group the transfer happens at rrGroupEnd: keep the buffer till then.
  if (group.depth > 0) group.buffers.push_back(std::move(b));
  return make_status(is_send ? st->rank : peer, 0, count);
}

// ---- init -----------------------------------------------------------------

rrConfig_t make_config(const char* call, std::optional<double> timeout, std::optional<long long> chunk_bytes,
                       std::optional<int> pipeline_depth, std::optional<bool> check_arguments) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  if (timeout) {
    const double ms = std::ceil(*timeout * 1000.0);
    if (!(*timeout > 0) || !std::isfinite(*timeout) || ms > INT_MAX) {
      invalid_argument(std::string(call) + ": timeout=" + py::str(py::float_(*timeout)).cast<std::string>() +
                       " must be a positive number of seconds (at most " + std::to_string(INT_MAX / 1000) + ")");
    }
    config.timeout_ms = static_cast<int>(ms);
  }
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

// Docstrings shared by each blocking collective and its non-blocking form.
constexpr const char* kReturnsRequest =
    "\n\nNon-blocking: returns a Request at once; the call runs on the communicator's worker thread in "
    "issue order (the same on every rank). The Request keeps the buffers alive; do not touch them until "
    "it finished (Request.wait / Request.test).";

std::string nonblocking_doc(const char* blocking_doc) { return std::string(blocking_doc) + kReturnsRequest; }

constexpr const char* kAllreduceDoc =
    "recvbuf[i] = op over every rank's sendbuf[i] (rrAllReduce).\n\n"
    "In place: pass ringreduce.IN_PLACE as sendbuf; recvbuf holds the input and gets the result. "
    "Out of place: sendbuf has as many elements as recvbuf, of the same type.";
constexpr const char* kReduceScatterDoc =
    "recvbuf = op over every rank's block `rank` of sendbuf (rrReduceScatter).\n\n"
    "sendbuf holds size blocks of len(recvbuf) elements. In place: pass IN_PLACE as sendbuf; recvbuf "
    "holds every rank's block (size * count elements) and this rank's result lands in its block `rank` "
    "(the others are left undefined), as NCCL's in-place form.";
constexpr const char* kAllgatherDoc =
    "recvbuf block r = rank r's sendbuf, on every rank (rrAllGather).\n\n"
    "recvbuf holds size * len(sendbuf) elements. In place: pass IN_PLACE as sendbuf; this rank's "
    "contribution is already in block `rank` of recvbuf.";
constexpr const char* kBroadcastDoc =
    "recvbuf = the root's sendbuf, on every rank (rrBroadcast).\n\n"
    "sendbuf is read on the root only (elsewhere it is ignored and may be None). In place: pass IN_PLACE "
    "as sendbuf; the root's recvbuf holds the data.";
constexpr const char* kReduceDoc =
    "The root's recvbuf = op over every rank's sendbuf (rrReduce).\n\n"
    "recvbuf is written on the root only (elsewhere it may be None). In place: pass IN_PLACE as sendbuf; "
    "recvbuf holds this rank's input (and, on the root, gets the result).";
constexpr const char* kGatherDoc =
    "The root's recvbuf block r = rank r's sendbuf (rrGather).\n\n"
    "recvbuf (size * len(sendbuf) elements) is used on the root only; elsewhere it may be None. In place, "
    "on the root only: pass IN_PLACE as sendbuf; the root's own block is already in block `root` of recvbuf.";
constexpr const char* kScatterDoc =
    "Rank r's recvbuf = block r of the root's sendbuf (rrScatter).\n\n"
    "sendbuf (size * len(recvbuf) elements) is read on the root only; elsewhere it may be None. In place, "
    "on the root only, as MPI's: pass IN_PLACE as recvbuf; the root's block stays in sendbuf.";
constexpr const char* kAlltoallDoc =
    "recvbuf block p = block `rank` of rank p's sendbuf (rrAllToAll).\n\n"
    "Both buffers hold size equal blocks and must not overlap (no in-place form).";
constexpr const char* kAlltoallvDoc =
    "All-to-all with a count per peer (rrAllToAllv): block p of sendbuf (sendcounts[p] elements at "
    "sdispls[p]) goes to rank p, and rank p's block for this rank lands at rdispls[p] of recvbuf "
    "(recvcounts[p] elements). Counts and displacements are in elements, one per rank; displacements "
    "default to the counts' running sum (packed blocks).";
constexpr const char* kBarrierDoc = "Returns once every rank has called it (rrBarrier).";

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "ringreduce's C API for Python: the buffer-protocol binding (mpi4py's shape).\n\n"
      "Use it through the ringreduce package (ringreduce.Comm, ringreduce.IN_PLACE, ...).";

  py::class_<InPlace>(m, "_InPlaceType", "The type of ringreduce.IN_PLACE.")
      .def("__repr__", [](const InPlace&) { return "ringreduce.IN_PLACE"; })
      .def("__reduce__", [](const InPlace&) { return py::str("IN_PLACE"); });
  in_place_object() = py::cast(InPlace{});
  m.attr("IN_PLACE") = in_place_object();
#ifdef RR_ANY_SOURCE
  m.attr("ANY_SOURCE") = static_cast<int>(RR_ANY_SOURCE);
#endif
  status_type() = py::module_::import("collections").attr("namedtuple")("Status", py::make_tuple("source", "tag", "count"),
                                                                         py::arg("module") = "ringreduce");
  status_type().attr("__doc__") =
      "A point-to-point message: source (the sender's rank; for a send, this rank), tag, count (elements).";
  m.attr("Status") = status_type();
  m.attr("HAS_BITWISE_OPS") = kHasBitwiseOps;
  m.attr("HAS_TAGS") = kHasTags;
  m.attr("HAS_ALLTOALLV") = kHasAllToAllv;
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
  m.def("_group_start", [] {
    (void)rrGroupStart();
    ++group_state().depth;
  }, "rrGroupStart (ringreduce.group() wraps it).");
  m.def("_group_end", [] {
    GroupState& g = group_state();
    if (g.depth == 0) invalid_usage("group end without a group start");
    rrResult_t r;
    std::string message;
    {
      py::gil_scoped_release nogil;
      r = rrGroupEnd();
      if (r != rrSuccess) message = rrGetLastError(nullptr);
    }
    if (--g.depth == 0) g.buffers.clear();
    if (r != rrSuccess) raise_error(r, message);
  }, "rrGroupEnd (ringreduce.group() wraps it).");

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

  py::class_<CommState, CommPtr> comm(m, "Comm",
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
      .def("destroy", [](CommState& s) { s.destroy(true); },
           "rrCommDestroy. First waits for this communicator's requests still in flight, each at most the "
           "communicator's timeout (their errors stay on their Request; abort() waits for none). Calls "
           "afterwards raise InvalidUsageError; a second destroy() does nothing.")
      .def("abort", &CommState::abort,
           "rrCommAbort: ends the communicator now, whatever its peers do. Calls running on it in other "
           "threads raise InvalidUsageError ('aborted') within about 10 ms, its requests finish with that "
           "error, and the peers' calls fail naming this rank. Does nothing if already ended.")
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

  // Collectives: blocking and non-blocking forms share the conversion.
  comm.def("allreduce", [](CommState& s, py::object send, py::object recv, py::object op) {
        Prepared p = prep_allreduce(s, send, recv, op, "allreduce");
        run_blocking(s, "allreduce", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", kAllreduceDoc)
      .def("iallreduce", [](const CommPtr& s, py::object send, py::object recv, py::object op) {
        Prepared p = prep_allreduce(*s, send, recv, op, "iallreduce");
        return run_async(s, "iallreduce", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", nonblocking_doc(kAllreduceDoc).c_str())
      .def("reduce_scatter", [](CommState& s, py::object send, py::object recv, py::object op) {
        Prepared p = prep_reduce_scatter(s, send, recv, op, "reduce_scatter");
        run_blocking(s, "reduce_scatter", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", kReduceScatterDoc)
      .def("ireduce_scatter", [](const CommPtr& s, py::object send, py::object recv, py::object op) {
        Prepared p = prep_reduce_scatter(*s, send, recv, op, "ireduce_scatter");
        return run_async(s, "ireduce_scatter", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", nonblocking_doc(kReduceScatterDoc).c_str())
      .def("allgather", [](CommState& s, py::object send, py::object recv) {
        Prepared p = prep_allgather(s, send, recv, "allgather");
        run_blocking(s, "allgather", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), kAllgatherDoc)
      .def("iallgather", [](const CommPtr& s, py::object send, py::object recv) {
        Prepared p = prep_allgather(*s, send, recv, "iallgather");
        return run_async(s, "iallgather", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), nonblocking_doc(kAllgatherDoc).c_str())
      .def("broadcast", [](CommState& s, py::object send, py::object recv, int root) {
        Prepared p = prep_broadcast(s, send, recv, root, "broadcast");
        run_blocking(s, "broadcast", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, kBroadcastDoc)
      .def("ibroadcast", [](const CommPtr& s, py::object send, py::object recv, int root) {
        Prepared p = prep_broadcast(*s, send, recv, root, "ibroadcast");
        return run_async(s, "ibroadcast", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, nonblocking_doc(kBroadcastDoc).c_str())
      .def("reduce", [](CommState& s, py::object send, py::object recv, py::object op, int root) {
        Prepared p = prep_reduce(s, send, recv, op, root, "reduce");
        run_blocking(s, "reduce", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::arg("root") = 0, kReduceDoc)
      .def("ireduce", [](const CommPtr& s, py::object send, py::object recv, py::object op, int root) {
        Prepared p = prep_reduce(*s, send, recv, op, root, "ireduce");
        return run_async(s, "ireduce", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::arg("root") = 0,
         nonblocking_doc(kReduceDoc).c_str())
      .def("gather", [](CommState& s, py::object send, py::object recv, int root) {
        Prepared p = prep_gather(s, send, recv, root, "gather");
        run_blocking(s, "gather", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, kGatherDoc)
      .def("igather", [](const CommPtr& s, py::object send, py::object recv, int root) {
        Prepared p = prep_gather(*s, send, recv, root, "igather");
        return run_async(s, "igather", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, nonblocking_doc(kGatherDoc).c_str())
      .def("scatter", [](CommState& s, py::object send, py::object recv, int root) {
        Prepared p = prep_scatter(s, send, recv, root, "scatter");
        run_blocking(s, "scatter", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, kScatterDoc)
      .def("iscatter", [](const CommPtr& s, py::object send, py::object recv, int root) {
        Prepared p = prep_scatter(*s, send, recv, root, "iscatter");
        return run_async(s, "iscatter", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, nonblocking_doc(kScatterDoc).c_str())
      .def("alltoall", [](CommState& s, py::object send, py::object recv) {
        Prepared p = prep_alltoall(s, send, recv, "alltoall");
        run_blocking(s, "alltoall", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), kAlltoallDoc)
      .def("ialltoall", [](const CommPtr& s, py::object send, py::object recv) {
        Prepared p = prep_alltoall(*s, send, recv, "ialltoall");
        return run_async(s, "ialltoall", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), nonblocking_doc(kAlltoallDoc).c_str())
      .def("barrier", [](CommState& s) {
        s.call("barrier", [](rrComm_t c) { return rrBarrier(c, nullptr); });
      }, kBarrierDoc)
      .def("ibarrier", [](const CommPtr& s) {
        Prepared p;
        p.run = [](rrComm_t c, rrRequest_t* r) { return rrBarrierAsync(c, r); };
        return run_async(s, "ibarrier", p);
      }, nonblocking_doc(kBarrierDoc).c_str());

  if (kHasAllToAllv) {
    comm.def("alltoallv", [](CommState& s, py::object send, py::object recv, py::object sc, py::object rc,
                           py::object sd, py::object rd) {
        Prepared p = prep_alltoallv(s, send, recv, sc, rc, sd, rd, "alltoallv");
        run_blocking(s, "alltoallv", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("sendcounts"), py::arg("recvcounts"),
         py::arg("sdispls") = py::none(), py::arg("rdispls") = py::none(), kAlltoallvDoc)
      .def("ialltoallv", [](const CommPtr& s, py::object send, py::object recv, py::object sc, py::object rc,
                            py::object sd, py::object rd) {
        Prepared p = prep_alltoallv(*s, send, recv, sc, rc, sd, rd, "ialltoallv");
        return run_async(s, "ialltoallv", p);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("sendcounts"), py::arg("recvcounts"),
         py::arg("sdispls") = py::none(), py::arg("rdispls") = py::none(), nonblocking_doc(kAlltoallvDoc).c_str());
  }

  // Point-to-point.
  comm.def("send", [](const CommPtr& s, py::object buf, int peer, int tag) {
        (void)p2p_blocking(s, true, buf, peer, tag);
      }, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0,
      "Sends buf to rank `peer` with `tag` (0 .. 2**31-1; rrSend, or rrIsendTag waited); returns once "
      "it was sent. Between ringreduce.group()'s start and end, tag-0 sends and receives are posted "
      "together at the end (a ring shift cannot deadlock). The receive's size must equal the send's.")
      .def("recv", [](const CommPtr& s, py::object buf, int peer, int tag) {
        return p2p_blocking(s, false, buf, peer, tag);
      }, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0,
      "Receives into buf from rank `peer` (rrRecv), or from whichever rank sends first with "
      "peer=ANY_SOURCE; returns once it arrived, with its Status(source, tag, count). Messages of one "
      "tag between two ranks match in the order sent; different tags match independently. Grouped as "
      "send() (tag 0 from a real peer only).")
      .def("isend", [](const CommPtr& s, py::object buf, int peer, int tag) {
        Prepared p = prep_p2p(true, buf, peer, tag, "isend");
        return run_async(s, "isend", p);
      }, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0,
      "Starts sending buf to rank `peer` with `tag` (rrIsendTag); returns a Request that keeps buf "
      "alive until it finished. Requests may be waited in any order.")
      .def("irecv", [](const CommPtr& s, py::object buf, int peer, int tag) {
        Prepared p = prep_p2p(false, buf, peer, tag, "irecv");
        return run_async(s, "irecv", p);
      }, py::arg("buf"), py::arg("peer"), py::arg("tag") = 0,
      "Starts receiving into buf from rank `peer`, or from any rank with ANY_SOURCE, a message of "
      "`tag` (rrIrecvTag); returns a Request that keeps buf alive until it finished. Request.status "
      "then says who sent it (source), its tag and count.");
}
