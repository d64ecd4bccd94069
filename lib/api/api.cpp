// The C entry points: argument checks, result codes, error text. Nothing
// below this file throws across it, and nothing here knows UCX.

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <memory>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "api/setup.hpp"
#include "comm/communicator.hpp"
#include "memory/memory_kind.hpp"
#include "reduce/reduce.hpp"
#include "ringreduce/ringreduce.h"

#define RR_API extern "C" __attribute__((visibility("default")))

struct rrComm {
  std::unique_ptr<rr::Communicator> impl;
  // Threads inside a call on this communicator; rrCommAbort waits for them
  // to leave before it frees anything.
  std::atomic<int> users{0};
};

struct rrRequest {
  rrComm_t comm;
  bool is_send;
  int peer;
  size_t bytes;
  rr::transport::Completion done;                 // point-to-point requests
  std::shared_ptr<rr::AsyncOperation> operation;  // collective requests
  // Set by rrCommAbort, which frees the communicator: the request's outcome,
  // for the rrTest / rrWait that releases it.
  bool orphaned = false;
  rr::Status outcome;
};

namespace {

// Every request issued and not yet finished: a wait on anything else (a
// request already finished, or never issued) is refused, not followed.
std::mutex& requests_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<rrRequest_t>& live_requests() {
  static auto* live = new std::unordered_set<rrRequest_t>();
  return *live;
}

// Counts the calling thread as inside `comm` for its lifetime.
class InComm {
 public:
  explicit InComm(rrComm_t comm) : comm_(comm) { comm_->users.fetch_add(1, std::memory_order_acq_rel); }
  ~InComm() { comm_->users.fetch_sub(1, std::memory_order_acq_rel); }
  InComm(const InComm&) = delete;
  InComm& operator=(const InComm&) = delete;

 private:
  rrComm_t comm_;
};

// Every live communicator, for SIGUSR1's dump. The handler only writes a
// byte to a pipe; a thread of ours does the dumping, outside signal context.
std::mutex& comms_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<rrComm_t>& live_comms() {
  static auto* live = new std::unordered_set<rrComm_t>();
  return *live;
}
int dump_pipe[2] = {-1, -1};

void on_dump_signal(int) {
  const int saved = errno;
  const char byte = 1;
  (void)!write(dump_pipe[1], &byte, 1);
  errno = saved;
}

void dump_all() {
  std::lock_guard<std::mutex> lock(comms_mutex());
  for (rrComm_t c : live_comms()) c->impl->dump();
}

// Installs the SIGUSR1 handler once, unless the program has its own. Ignored
// counts as none: rr-run starts its ranks with SIGUSR1 ignored.
void install_dump_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
    if ((current.sa_flags & SA_SIGINFO) || (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN)) return;
    if (pipe2(dump_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    // The reader blocks; only the writer (the handler) must not.
    fcntl(dump_pipe[0], F_SETFL, fcntl(dump_pipe[0], F_GETFL) & ~O_NONBLOCK);
    std::thread([] {
      char byte = 0;
      while (read(dump_pipe[0], &byte, 1) > 0 || errno == EINTR) dump_all();
    }).detach();
    struct sigaction action {};
    action.sa_handler = &on_dump_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &action, nullptr);
  });
}

void register_comm(rrComm_t comm) {
  install_dump_signal();
  std::lock_guard<std::mutex> lock(comms_mutex());
  live_comms().insert(comm);
}

void unregister_comm(rrComm_t comm) {
  std::lock_guard<std::mutex> lock(comms_mutex());
  live_comms().erase(comm);
}

bool take_if_live(rrRequest_t request, bool erase) {
  std::lock_guard<std::mutex> lock(requests_mutex());
  auto it = live_requests().find(request);
  if (it == live_requests().end()) return false;
  if (erase) live_requests().erase(it);
  return true;
}

}  // namespace


namespace {

thread_local std::string thread_last_error;

// Records the error where rrGetLastError finds it: on the communicator when
// there is one, and on the calling thread always.
rrResult_t fail(rrComm_t comm, const rr::Status& status) {
  if (status.ok()) return rrSuccess;
  thread_last_error = status.message();
  if (comm && comm->impl) comm->impl->set_last_error(status.message());
  return rr::to_result(status.code());
}

rrResult_t fail(rrComm_t comm, rr::Code code, const std::string& message) {
  return fail(comm, rr::Status(code, message));
}

// Runs `body`, turning an escaping exception into a result code.
template <typename Body>
rrResult_t guarded(rrComm_t comm, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(comm, rr::Code::kSystemError, "out of host memory");
  } catch (const std::exception& e) {
    return fail(comm, rr::Code::kInternalError, std::string("internal error: ") + e.what());
  }
}

rr::Status check_buffers(const char* call, const void* sendbuff, const void* recvbuff, size_t count,
                         rrDataType_t datatype) {
  const size_t elem = rr::reduce::dtype_size(datatype);
  if (count == 0) return rr::Status::Ok();
  if (!sendbuff) return rr::InvalidArgument(std::string(call) + ": sendbuff is NULL with count=" + std::to_string(count));
  if (!recvbuff) return rr::InvalidArgument(std::string(call) + ": recvbuff is NULL with count=" + std::to_string(count));
  if (count > SIZE_MAX / elem) return rr::InvalidArgument(std::string(call) + ": count=" + std::to_string(count) + " overflows");
  const auto s = reinterpret_cast<uintptr_t>(sendbuff);
  const auto r = reinterpret_cast<uintptr_t>(recvbuff);
  const size_t bytes = count * elem;
  if (s != r && s < r + bytes && r < s + bytes) {
    return rr::InvalidArgument(std::string(call) +
                               ": sendbuff and recvbuff overlap without being equal (in place means sendbuff == recvbuff)");
  }
  return rr::Status::Ok();
}

rrResult_t make_comm(rr::Status (*setup)(const void*, int, int, const rrConfig_t*, std::unique_ptr<rr::Communicator>*),
                     rrComm_t* comm, const void* how, int nranks, int rank, const rrConfig_t* config) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm (the out-pointer) is NULL");
  return guarded(nullptr, [&] {
    std::unique_ptr<rr::Communicator> impl;
    rr::Status s = setup(how, nranks, rank, config, &impl);
    if (!s.ok()) return fail(nullptr, s);
    *comm = new rrComm{std::move(impl)};
    register_comm(*comm);
    return rrSuccess;
  });
}

}  // namespace

RR_API rrResult_t rrGetVersion(int* version) {
  if (!version) return fail(nullptr, rr::Code::kInvalidArgument, "version is NULL");
  *version = RR_VERSION_CODE;
  return rrSuccess;
}

RR_API const char* rrGetErrorString(rrResult_t result) {
  switch (result) {
    case rrSuccess: return "no error";
    case rrUnhandledCudaError: return "unhandled cuda error";
    case rrSystemError: return "unhandled system error (network, memory or UCX)";
    case rrInternalError: return "internal error - please report this issue";
    case rrInvalidArgument: return "invalid argument";
    case rrInvalidUsage: return "invalid usage";
    case rrRemoteError: return "remote process exited or there was a network error";
    case rrInProgress: return "operation in progress";
    case rrTimeout: return "timed out waiting for a peer";
    default: return "unknown result code";
  }
}

RR_API const char* rrGetLastError(rrComm_t comm) {
  // A copy on the calling thread: another thread may replace the
  // communicator's text while the caller still reads this one.
  if (comm && comm->impl) thread_last_error = comm->impl->last_error();
  return thread_last_error.c_str();
}

RR_API rrResult_t rrGetUniqueId(rrUniqueId* unique_id) {
  if (!unique_id) return fail(nullptr, rr::Code::kInvalidArgument, "unique_id is NULL");
  return guarded(nullptr, [&] { return fail(nullptr, rr::setup::unique_id(unique_id)); });
}

RR_API rrResult_t rrCommInitRankConfig(rrComm_t* comm, int nranks, rrUniqueId comm_id, int rank,
                                       const rrConfig_t* config) {
  return make_comm(&rr::setup::from_unique_id, comm, &comm_id, nranks, rank, config);
}

RR_API rrResult_t rrCommInitRank(rrComm_t* comm, int nranks, rrUniqueId comm_id, int rank) {
  return rrCommInitRankConfig(comm, nranks, comm_id, rank, nullptr);
}

RR_API rrResult_t rrCommInitUrl(rrComm_t* comm, const char* url, int nranks, int rank, const rrConfig_t* config) {
  if (!url) return fail(nullptr, rr::Code::kInvalidArgument, "url is NULL");
  return make_comm(&rr::setup::from_url, comm, url, nranks, rank, config);
}

RR_API rrResult_t rrCommInitFromEnv(rrComm_t* comm) { return rrCommInitUrl(comm, "env://", -1, -1, nullptr); }

RR_API rrResult_t rrCommSplit(rrComm_t comm, int color, int key, rrComm_t* newcomm, const rrConfig_t* config) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommSplit: comm is NULL");
  if (!newcomm) return fail(comm, rr::Code::kInvalidArgument, "rrCommSplit: newcomm is NULL");
  return guarded(comm, [&] {
    rr::Settings settings = comm->impl->settings();
    if (config) {
      rr::Status s = rr::resolve_settings(config, &settings);
      if (!s.ok()) return fail(comm, s);
    }
    std::unique_ptr<rr::Communicator> child;
    InComm inside(comm);
    rr::Status s = comm->impl->queue().run([&] { return comm->impl->split(color, key, settings, &child); });
    if (!s.ok()) return fail(comm, s);
    *newcomm = child ? new rrComm{std::move(child)} : nullptr;
    if (*newcomm) register_comm(*newcomm);
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommDestroy(rrComm_t comm) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  {
    std::lock_guard<std::mutex> lock(requests_mutex());
    size_t live = 0;
    for (rrRequest_t r : live_requests()) live += r->comm == comm ? 1 : 0;
    if (live > 0) {
      return fail(comm, rr::Code::kInvalidUsage,
                  "rrCommDestroy: " + std::to_string(live) + " request(s) on this communicator are still in flight; "
                  "wait for them first");
    }
  }
  return guarded(nullptr, [&] {
    unregister_comm(comm);
    delete comm;
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommAbort(rrComm_t comm) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommAbort: comm is NULL");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  rr::Communicator& impl = *comm->impl;
  impl.request_abort();
  // Calls on other threads notice at their next still round (within the
  // 10 ms a wait sleeps at most) and leave; wait for them, boundedly.
  const auto limit = start + std::chrono::milliseconds(900);
  while (comm->users.load(std::memory_order_acquire) > 0 && Clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int stuck = comm->users.load(std::memory_order_acquire);
  if (stuck > 0) {
    // Freeing it under their feet would crash them: leave it allocated.
    return fail(nullptr, rr::Code::kInternalError,
                "rrCommAbort: " + std::to_string(stuck) + " thread(s) still inside calls on this communicator after "
                "900 ms; it stays allocated (please report this)");
  }
  return guarded(nullptr, [&] {
    // Queued operations fail at once (the communicator is aborting); then
    // the peers hear of it, and closing waits only briefly for them.
    (void)impl.queue().run([&] {
      impl.finish_abort();
      impl.transport().set_close_timeout(std::chrono::milliseconds(200));
      return rr::Status::Ok();
    });
    impl.queue().stop();
    for (;;) {
      // A thread polling one of its requests (rrTest) may have come back in
      // since: mark the requests only while nobody is inside (see
      // finish_request), and free nothing while anyone is.
      std::unique_lock<std::mutex> lock(requests_mutex());
      if (comm->users.load(std::memory_order_acquire) > 0) {
        lock.unlock();
        if (Clock::now() >= limit) {
          return fail(nullptr, rr::Code::kInternalError,
                      "rrCommAbort: a thread is still inside a call on this communicator after 900 ms; it stays "
                      "allocated (please report this)");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      for (rrRequest_t r : live_requests()) {
        if (r->comm != comm) continue;
        r->orphaned = true;
        r->outcome = rr::InvalidUsage("the communicator was aborted (rrCommAbort)");
        rr::Status s;
        if (r->operation && impl.queue().test(*r->operation, &s) && s.ok()) r->outcome = s;
        if (!r->operation && r->done.done && !r->done.failed) r->outcome = rr::Status::Ok();
        r->comm = nullptr;
      }
      break;
    }
    unregister_comm(comm);
    delete comm;
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommDump(rrComm_t comm) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommDump: comm is NULL");
  comm->impl->dump();
  return rrSuccess;
}

RR_API rrResult_t rrCommGetAsyncError(rrComm_t comm, rrResult_t* asyncError) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommGetAsyncError: comm is NULL");
  if (!asyncError) return fail(comm, rr::Code::kInvalidArgument, "rrCommGetAsyncError: asyncError is NULL");
  *asyncError = comm->impl->async_error();
  return rrSuccess;
}

RR_API rrResult_t rrCommCount(const rrComm_t comm, int* count) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!count) return fail(comm, rr::Code::kInvalidArgument, "count is NULL");
  *count = comm->impl->size();
  return rrSuccess;
}

RR_API rrResult_t rrCommUserRank(const rrComm_t comm, int* rank) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!rank) return fail(comm, rr::Code::kInvalidArgument, "rank is NULL");
  *rank = comm->impl->rank();
  return rrSuccess;
}

namespace {

// Runs a checked collective now (request == NULL) or queues it and hands back
// a request for rrTest / rrWait. `body` captures its arguments by value.
template <typename Body>
rrResult_t dispatch(rrComm_t comm, const rr::Status& checked, rrRequest_t* request, Body body) {
  if (!checked.ok()) return fail(comm, checked);
  InComm inside(comm);
  return guarded(comm, [&] {
    if (!request) return fail(comm, comm->impl->queue().run(body));
    auto req = std::make_unique<rrRequest>();
    req->comm = comm;
    req->operation = comm->impl->queue().enqueue(std::function<rr::Status()>(body));
    {
      std::lock_guard<std::mutex> lock(requests_mutex());
      live_requests().insert(req.get());
    }
    *request = req.release();
    return rrSuccess;
  });
}

}  // namespace

namespace {

// The checks every collective shares: comm, dtype, op (when it has one), stream.
static_assert(sizeof(rrDataType_t) == sizeof(int) && sizeof(rrRedOp_t) == sizeof(int), "enums are ints in the C ABI");

rr::Status check_call(const char* call, rrComm_t comm, rrDataType_t datatype, const rrRedOp_t* op, void* stream) {
  if (!comm) return rr::InvalidArgument(std::string(call) + ": comm is NULL");
  // A C caller may pass any int as an enum; in C++ loading an out-of-range
  // enum value is undefined, so look at its bytes instead.
  int raw_dtype = 0;
  std::memcpy(&raw_dtype, &datatype, sizeof(raw_dtype));
  if (!rr::reduce::valid_dtype(raw_dtype)) {
    return rr::InvalidArgument(std::string(call) + ": datatype=" + std::to_string(raw_dtype) + " is not an rrDataType_t");
  }
  if (op) {
    int raw_op = 0;
    std::memcpy(&raw_op, op, sizeof(raw_op));
    if (!rr::reduce::valid_op(raw_op)) {
      return rr::InvalidArgument(std::string(call) + ": op=" + std::to_string(raw_op) + " is not an rrRedOp_t");
    }
  }
#if !RR_HAVE_CUDA
  if (stream) {
    return rr::InvalidUsage(std::string(call) +
                            ": stream is not NULL, but stream-ordered calls need the CUDA build of ringreduce");
  }
#else
  (void)stream;
#endif
  return rr::Status::Ok();
}

// How a call runs: on the calling thread, blocking (host buffers and no
// stream), or ordered on a stream (a stream, or device buffers: then through
// the staging pipeline; comm/stream_order.hpp).
struct Route {
  bool stream_ordered = false;
  bool staged = false;
  int device = -1;  // the device buffers' GPU
};

struct Buffer {
  const char* name;
  const void* ptr;
};

// Classifies the buffers this rank uses (NULL ones are skipped). Device
// buffers are refused beside host buffers (mixed calls are not staged) and
// by the Async forms, which have no stream to order them on.
rr::Status route(const char* call, void* stream, bool async, std::initializer_list<Buffer> buffers, Route* out) {
  Route r;
  const Buffer* host = nullptr;
  const Buffer* device = nullptr;
  for (const Buffer& b : buffers) {
    if (!b.ptr) continue;
    rr::memory::Placement placement;
    rr::Status s = rr::memory::classify(b.ptr, b.name, &placement);
    if (!s.ok()) return rr::Status(s.code(), std::string(call) + ": " + s.message());
    if (!placement.on_device()) {
      host = &b;
      continue;
    }
    if (device && placement.device != r.device) {
      return rr::InvalidArgument(std::string(call) + ": " + device->name + " is on device " + std::to_string(r.device) +
                                 " but " + b.name + " is on device " + std::to_string(placement.device));
    }
    device = &b;
    r.device = placement.device;
  }
  if (device && host) {
    return rr::InvalidArgument(std::string(call) + ": " + device->name + " is device memory but " + host->name +
                               " is host memory; pass both on the device or both on the host");
  }
  if (device && async) {
    return rr::InvalidArgument(std::string(call) + "Async: " + device->name +
                               " is device memory; the Async forms take host buffers (order device buffers on a "
                               "stream with " + call + ")");
  }
  r.staged = device != nullptr;
  r.stream_ordered = r.staged || stream != nullptr;
  *out = r;
  return rr::Status::Ok();
}

// Point-to-point takes host buffers and no stream.
rr::Status host_only(const char* call, const char* name, const void* buf, void* stream) {
  if (stream) {
    return rr::InvalidArgument(std::string(call) + ": stream is not NULL; point-to-point calls are not stream-ordered "
                               "(pass NULL, with host buffers)");
  }
  rr::memory::Placement placement;
  rr::Status s = rr::memory::classify(buf, name, &placement);
  if (!s.ok()) return rr::Status(s.code(), std::string(call) + ": " + s.message());
  if (placement.on_device()) {
    return rr::InvalidArgument(std::string(call) + ": " + name + " is " + rr::memory::kind_name(placement.kind) +
                               "; point-to-point calls take host buffers");
  }
  return rr::Status::Ok();
}

// As dispatch(), or, for a stream-ordered route, queues the call on the
// stream and returns at once: `staged` for device buffers (nullptr for a call
// without buffers), `body` for host ones. Nothing is wrapped
// for a blocking call: its data path allocates nothing.
template <typename Body, typename Staged>
rrResult_t dispatch_routed(rrComm_t comm, const rr::Status& checked, const char* call, const Route& route,
                           void* stream, rrRequest_t* request, Body body, Staged staged) {
  if (!checked.ok() || !route.stream_ordered) return dispatch(comm, checked, request, body);
  InComm inside(comm);
  return guarded(comm, [&] {
    std::function<rr::StagedCollectives::Plan(const rr::StagedCollectives&)> plan;
    if constexpr (!std::is_same_v<Staged, std::nullptr_t>) {
      if (route.staged) plan = std::move(staged);
    }
    if (!plan) plan = [body](const rr::StagedCollectives&) { return rr::StagedCollectives::host_call(body); };
    return fail(comm, comm->impl->enqueue_on_stream(call, stream, route.device, plan));
  });
}

// A buffer of `nranks` blocks and one of a single block of `count` elements,
// which may only overlap the first exactly at block `rank` (the in-place form).
rr::Status check_blocks(const char* call, const char* big_name, const void* big, int nranks,
                        const char* small_name, const void* small, size_t small_count, int rank, size_t elem) {
  if (small_count == 0) return rr::Status::Ok();
  if (!big) return rr::InvalidArgument(std::string(call) + ": " + big_name + " is NULL with count " + std::to_string(small_count));
  if (!small) return rr::InvalidArgument(std::string(call) + ": " + small_name + " is NULL with count " + std::to_string(small_count));
  if (small_count > SIZE_MAX / elem / static_cast<size_t>(nranks)) {
    return rr::InvalidArgument(std::string(call) + ": count=" + std::to_string(small_count) + " overflows");
  }
  const auto b = reinterpret_cast<uintptr_t>(big);
  const auto s = reinterpret_cast<uintptr_t>(small);
  const size_t big_bytes = small_count * static_cast<size_t>(nranks) * elem;
  const size_t small_bytes = small_count * elem;
  const uintptr_t in_place = b + static_cast<size_t>(rank) * small_bytes;
  if (s != in_place && s < b + big_bytes && b < s + small_bytes) {
    return rr::InvalidArgument(std::string(call) + ": " + small_name + " overlaps " + big_name +
                               " other than in place (in place means " + small_name + " == " + big_name +
                               " + rank * count elements)");
  }
  return rr::Status::Ok();
}

}  // namespace

static rrResult_t reduce_scatter_call(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrReduceScatter", comm, datatype, &op, stream);
  if (s.ok()) {
    s = check_blocks("rrReduceScatter", "sendbuff", sendbuff, comm->impl->size(), "recvbuff",
                     recvbuff, recvcount, comm->impl->rank(), rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) s = route("rrReduceScatter", stream, request != nullptr, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrReduceScatter", r, stream, request,
      [=] { return comm->impl->reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op); },
      [=](const rr::StagedCollectives& staged) { return staged.reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op); });
}

static rrResult_t all_gather_call(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrAllGather", comm, datatype, nullptr, stream);
  if (s.ok()) {
    s = check_blocks("rrAllGather", "recvbuff", recvbuff, comm->impl->size(), "sendbuff", sendbuff,
                     sendcount, comm->impl->rank(), rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) s = route("rrAllGather", stream, request != nullptr, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllGather", r, stream, request,
      [=] { return comm->impl->all_gather(sendbuff, recvbuff, sendcount, datatype); },
      [=](const rr::StagedCollectives& staged) { return staged.all_gather(sendbuff, recvbuff, sendcount, datatype); });
}

static rrResult_t all_reduce_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrAllReduce", comm, datatype, &op, stream);
  if (s.ok()) s = check_buffers("rrAllReduce", sendbuff, recvbuff, count, datatype);
  Route r;
  if (s.ok()) s = route("rrAllReduce", stream, request != nullptr, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllReduce", r, stream, request,
      [=] { return comm->impl->allreduce(sendbuff, recvbuff, count, datatype, op); },
      [=](const rr::StagedCollectives& staged) { return staged.allreduce(sendbuff, recvbuff, count, datatype, op); });
}

namespace {

rr::Status need(const char* call, const char* name, const void* buf, size_t count) {
  if (count > 0 && !buf) return rr::InvalidArgument(std::string(call) + ": " + name + " is NULL with count " + std::to_string(count));
  return rr::Status::Ok();
}

rr::Status check_root(const char* call, rrComm_t comm, int root) {
  if (root < 0 || root >= comm->impl->size()) {
    return rr::InvalidArgument(std::string(call) + ": root=" + std::to_string(root) + " out of range for " +
                               std::to_string(comm->impl->size()) + " ranks");
  }
  return rr::Status::Ok();
}

// The calling thread's group: depth of rrGroupStart nesting and the
// communicators holding queued sends and receives, in first-use order.
struct Group {
  int depth = 0;
  std::vector<rrComm_t> comms;
};
thread_local Group group;

}  // namespace

static rrResult_t broadcast_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrBroadcast", comm, datatype, nullptr, stream);
  if (s.ok()) s = check_root("rrBroadcast", comm, root);
  if (s.ok() && comm->impl->rank() == root) s = need("rrBroadcast", "sendbuff (on the root)", sendbuff, count);
  if (s.ok()) s = need("rrBroadcast", "recvbuff", recvbuff, count);
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrBroadcast", stream, request != nullptr,
              {{"sendbuff", is_root ? sendbuff : nullptr}, {"recvbuff", recvbuff}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrBroadcast", r, stream, request,
      [=] { return comm->impl->broadcast(sendbuff, recvbuff, count, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.broadcast(sendbuff, recvbuff, count, datatype, root); });
}

static rrResult_t reduce_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrReduce", comm, datatype, &op, stream);
  if (s.ok()) s = check_root("rrReduce", comm, root);
  if (s.ok()) s = need("rrReduce", "sendbuff", sendbuff, count);
  if (s.ok() && comm->impl->rank() == root) s = check_buffers("rrReduce", sendbuff, recvbuff, count, datatype);
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrReduce", stream, request != nullptr,
              {{"sendbuff", sendbuff}, {"recvbuff", is_root ? recvbuff : nullptr}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrReduce", r, stream, request,
      [=] { return comm->impl->reduce(sendbuff, recvbuff, count, datatype, op, root); },
      [=](const rr::StagedCollectives& staged) { return staged.reduce(sendbuff, recvbuff, count, datatype, op, root); });
}

static rrResult_t gather_call(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrGather", comm, datatype, nullptr, stream);
  if (s.ok()) s = check_root("rrGather", comm, root);
  if (s.ok()) s = need("rrGather", "sendbuff", sendbuff, sendcount);
  if (s.ok() && comm->impl->rank() == root) {
    s = check_blocks("rrGather", "recvbuff", recvbuff, comm->impl->size(), "sendbuff", sendbuff, sendcount, root,
                     rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrGather", stream, request != nullptr,
              {{"sendbuff", sendbuff}, {"recvbuff", is_root ? recvbuff : nullptr}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrGather", r, stream, request,
      [=] { return comm->impl->gather(sendbuff, recvbuff, sendcount, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.gather(sendbuff, recvbuff, sendcount, datatype, root); });
}

static rrResult_t scatter_call(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrScatter", comm, datatype, nullptr, stream);
  if (s.ok()) s = check_root("rrScatter", comm, root);
  if (s.ok()) s = need("rrScatter", "recvbuff", recvbuff, recvcount);
  if (s.ok() && comm->impl->rank() == root) {
    s = check_blocks("rrScatter", "sendbuff", sendbuff, comm->impl->size(), "recvbuff", recvbuff, recvcount, root,
                     rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrScatter", stream, request != nullptr,
              {{"sendbuff", is_root ? sendbuff : nullptr}, {"recvbuff", recvbuff}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrScatter", r, stream, request,
      [=] { return comm->impl->scatter(sendbuff, recvbuff, recvcount, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.scatter(sendbuff, recvbuff, recvcount, datatype, root); });
}

static rrResult_t all_to_all_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrAllToAll", comm, datatype, nullptr, stream);
  if (s.ok()) {
    const size_t n = static_cast<size_t>(comm->impl->size());
    const size_t elem = rr::reduce::dtype_size(datatype);
    if (count > SIZE_MAX / elem / n) {
      s = rr::InvalidArgument("rrAllToAll: count=" + std::to_string(count) + " overflows");
    } else {
      s = need("rrAllToAll", "sendbuff", sendbuff, count);
      if (s.ok()) s = need("rrAllToAll", "recvbuff", recvbuff, count);
      const auto a = reinterpret_cast<uintptr_t>(sendbuff);
      const auto b = reinterpret_cast<uintptr_t>(recvbuff);
      const size_t bytes = count * n * elem;
      if (s.ok() && count > 0 && a < b + bytes && b < a + bytes) {
        s = rr::InvalidArgument("rrAllToAll: sendbuff and recvbuff overlap (all-to-all has no in-place form here)");
      }
    }
  }
  Route r;
  if (s.ok()) s = route("rrAllToAll", stream, request != nullptr, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllToAll", r, stream, request,
      [=] { return comm->impl->all_to_all(sendbuff, recvbuff, count, datatype); },
      [=](const rr::StagedCollectives& staged) { return staged.all_to_all(sendbuff, recvbuff, count, datatype); });
}

static rrResult_t barrier_call(rrComm_t comm, void* stream, rrRequest_t* request) {
  rr::Status s = check_call("rrBarrier", comm, rrUint8, nullptr, stream);
  Route r;
  if (s.ok()) s = route("rrBarrier", stream, request != nullptr, {}, &r);
  return dispatch_routed(comm, s, "rrBarrier", r, stream, request, [=] { return comm->impl->barrier(); }, nullptr);
}

RR_API rrResult_t rrReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream) {
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, nullptr);
}

RR_API rrResult_t rrReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceScatterAsync: request is NULL");
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, nullptr, request);
}

RR_API rrResult_t rrAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, void* stream) {
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, stream, nullptr);
}

RR_API rrResult_t rrAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllGatherAsync: request is NULL");
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, nullptr, request);
}

RR_API rrResult_t rrAllReduce(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream) {
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, stream, nullptr);
}

RR_API rrResult_t rrAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllReduceAsync: request is NULL");
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, nullptr, request);
}

RR_API rrResult_t rrBroadcast(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr);
}

RR_API rrResult_t rrBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBroadcastAsync: request is NULL");
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, nullptr, request);
}

RR_API rrResult_t rrReduce(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, void* stream) {
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, stream, nullptr);
}

RR_API rrResult_t rrReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceAsync: request is NULL");
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, nullptr, request);
}

RR_API rrResult_t rrGather(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, stream, nullptr);
}

RR_API rrResult_t rrGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrGatherAsync: request is NULL");
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, nullptr, request);
}

RR_API rrResult_t rrScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, stream, nullptr);
}

RR_API rrResult_t rrScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrScatterAsync: request is NULL");
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, nullptr, request);
}

RR_API rrResult_t rrAllToAll(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, void* stream) {
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, stream, nullptr);
}

RR_API rrResult_t rrAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllToAllAsync: request is NULL");
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, nullptr, request);
}

RR_API rrResult_t rrBarrier(rrComm_t comm, void* stream) {
  return barrier_call(comm, stream, nullptr);
}

RR_API rrResult_t rrBarrierAsync(rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBarrierAsync: request is NULL");
  return barrier_call(comm, nullptr, request);
}

RR_API rrResult_t rrGroupStart(void) {
  ++group.depth;
  return rrSuccess;
}

RR_API rrResult_t rrGroupEnd(void) {
  if (group.depth == 0) return fail(nullptr, rr::Code::kInvalidUsage, "rrGroupEnd without rrGroupStart");
  if (--group.depth > 0) return rrSuccess;
  std::vector<rrComm_t> comms;
  comms.swap(group.comms);
  rrResult_t first = rrSuccess;
  for (rrComm_t comm : comms) {
    InComm inside(comm);
    rrResult_t r = guarded(comm, [&] {
      return fail(comm, comm->impl->queue().run([&] { return comm->impl->flush_group(); }, /*overtake=*/true));
    });
    if (first == rrSuccess) first = r;
  }
  return first;
}

namespace {

rrResult_t post_request(bool is_send, void* buf, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                        rrRequest_t* request) {
  const char* call = is_send ? "rrIsend" : "rrIrecv";
  rr::Status s = check_call(call, comm, datatype, nullptr, nullptr);
  if (s.ok()) s = need(call, is_send ? "sendbuff" : "recvbuff", buf, count);
  if (s.ok()) s = host_only(call, is_send ? "sendbuff" : "recvbuff", buf, nullptr);
  if (s.ok() && !request) s = rr::InvalidArgument(std::string(call) + ": request is NULL");
  if (!s.ok()) return fail(comm, s);
  InComm inside(comm);
  return guarded(comm, [&] {
    auto req = std::make_unique<rrRequest>();
    req->comm = comm;
    req->is_send = is_send;
    req->peer = peer;
    req->bytes = count * rr::reduce::dtype_size(datatype);
    rr::Status posted = comm->impl->queue().run(
        [&] { return comm->impl->post_p2p(is_send, buf, count, datatype, peer, &req->done); }, /*overtake=*/true);
    if (!posted.ok()) return fail(comm, posted);
    {
      std::lock_guard<std::mutex> lock(requests_mutex());
      live_requests().insert(req.get());
    }
    *request = req.release();
    return rrSuccess;
  });
}

rrResult_t finish_request(rrRequest_t request, bool block, int* done) {
  const char* call = block ? "rrWait" : "rrTest";
  // Under the registry's lock, which rrCommAbort holds while it marks the
  // requests of the communicator it frees: either the request is orphaned
  // already, or this thread counts as inside its communicator before abort
  // can look (and wait) again.
  rrComm_t comm = nullptr;
  bool orphaned = false;
  rr::Status outcome;
  {
    std::lock_guard<std::mutex> lock(requests_mutex());
    auto it = request ? live_requests().find(request) : live_requests().end();
    if (it == live_requests().end()) {
      return fail(nullptr, rr::Code::kInvalidUsage,
                  std::string(call) + ": request is not in flight (already finished, never issued, or NULL)");
    }
    if (request->orphaned) {
      orphaned = true;
      outcome = request->outcome;
      live_requests().erase(it);
    } else {
      comm = request->comm;
      comm->users.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  if (orphaned) {
    // Its communicator was aborted and is gone.
    if (done) *done = 1;
    delete request;
    return fail(nullptr, outcome);
  }
  struct Leave {
    rrComm_t comm;
    ~Leave() { comm->users.fetch_sub(1, std::memory_order_acq_rel); }
  } leave{comm};
  return guarded(comm, [&] {
    rr::OperationQueue& queue = comm->impl->queue();
    bool finished = false;
    rr::Status s;
    if (request->operation) {
      if (block) {
        s = queue.wait(*request->operation);
        finished = true;
      } else {
        finished = queue.test(*request->operation, &s);
      }
    } else {
      // Point-to-point: poll a little at a time, so queued collectives keep
      // running between polls (a peer may need them before it sends).
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(comm->impl->settings().timeout_ms);
      for (int polls = 0;; ++polls) {
        s = queue.run([&] {
          return comm->impl->wait_p2p(request->done, request->is_send, request->bytes, request->peer, false, &finished);
        }, /*overtake=*/true);
        if (finished || !s.ok() || !block) break;
        if (comm->impl->aborting()) {
          s = rr::InvalidUsage("the communicator was aborted (rrCommAbort)");
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          s = rr::Timeout(std::string(request->is_send ? "send of " : "receive of ") + std::to_string(request->bytes) +
                          " bytes " + (request->is_send ? "to" : "from") + " rank " + std::to_string(request->peer) +
                          " did not finish within " + std::to_string(comm->impl->settings().timeout_ms) + " ms");
          break;
        }
        if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
        else std::this_thread::yield();
      }
    }
    if (done) *done = finished ? 1 : 0;
    // A failed or finished request is released; a pending one stays for the next test or wait.
    if (finished || !s.ok()) {
      const bool in_flight = !request->operation && !request->done.done;
      if (in_flight) {
        (void)queue.run([&] {  // canceling cannot fail
          comm->impl->transport().cancel(&request->done);
          return rr::Status::Ok();
        }, true);
      }
      // A transfer UCX may still hold is leaked rather than left dangling.
      if (take_if_live(request, true) && !(in_flight && !request->done.done)) delete request;
    }
    return fail(comm, s);
  });
}

}  // namespace

namespace {

rrResult_t point_to_point(bool is_send, void* buf, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                          void* stream) {
  const char* call = is_send ? "rrSend" : "rrRecv";
  rr::Status s = check_call(call, comm, datatype, nullptr, stream);
  if (s.ok()) s = need(call, is_send ? "sendbuff" : "recvbuff", buf, count);
  if (s.ok()) s = host_only(call, is_send ? "sendbuff" : "recvbuff", buf, stream);
  if (!s.ok()) return fail(comm, s);
  const bool grouped = group.depth > 0;
  if (!grouped && peer != comm->impl->rank()) {
    // Post, then poll in short turns, so queued collectives keep running
    // while this rank waits (its peer may need them before it answers).
    rrRequest_t request = nullptr;
    rrResult_t posted = post_request(is_send, buf, count, datatype, peer, comm, &request);
    if (posted != rrSuccess) return posted;
    return finish_request(request, true, nullptr);
  }
  InComm inside(comm);
  return guarded(comm, [&] {
    if (grouped && !comm->impl->has_grouped()) group.comms.push_back(comm);
    return fail(comm, comm->impl->queue().run(
                          [&] {
                            return is_send ? comm->impl->send(buf, count, datatype, peer, grouped)
                                           : comm->impl->recv(buf, count, datatype, peer, grouped);
                          },
                          /*overtake=*/true));
  });
}

}  // namespace

RR_API rrResult_t rrSend(const void* sendbuff, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                         void* stream) {
  return point_to_point(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
}

RR_API rrResult_t rrRecv(void* recvbuff, size_t count, rrDataType_t datatype, int peer, rrComm_t comm, void* stream) {
  return point_to_point(false, recvbuff, count, datatype, peer, comm, stream);
}

RR_API rrResult_t rrIsend(const void* sendbuff, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                          rrRequest_t* request) {
  return post_request(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, request);
}

RR_API rrResult_t rrIrecv(void* recvbuff, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                          rrRequest_t* request) {
  return post_request(false, recvbuff, count, datatype, peer, comm, request);
}

RR_API rrResult_t rrTest(rrRequest_t request, int* done) {
  if (!done) return fail(nullptr, rr::Code::kInvalidArgument, "rrTest: done is NULL");
  return finish_request(request, false, done);
}

RR_API rrResult_t rrWait(rrRequest_t request) { return finish_request(request, true, nullptr); }

RR_API rrResult_t rrCommGetPeerBytes(const rrComm_t comm, int peer, uint64_t* bytes_sent, uint64_t* bytes_received) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (peer < 0 || peer >= comm->impl->size()) {
    return fail(comm, rr::Code::kInvalidArgument,
                "peer=" + std::to_string(peer) + " out of range for " + std::to_string(comm->impl->size()) + " ranks");
  }
  if (!bytes_sent || !bytes_received) return fail(comm, rr::Code::kInvalidArgument, "bytes_sent or bytes_received is NULL");
  *bytes_sent = comm->impl->transport().bytes_sent(peer);
  *bytes_received = comm->impl->transport().bytes_received(peer);
  return rrSuccess;
}

RR_API rrResult_t rrCommGetPoolStats(const rrComm_t comm, size_t* pool_bytes, uint64_t* allocations) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!pool_bytes || !allocations) return fail(comm, rr::Code::kInvalidArgument, "pool_bytes or allocations is NULL");
  *pool_bytes = comm->impl->pool().bytes();
  *allocations = comm->impl->pool().allocations();
  return rrSuccess;
}
