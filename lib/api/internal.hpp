#pragma once
// What the C entry points (lib/api/*.cpp) share: the handles behind rrComm_t
// and rrRequest_t, how an error is recorded and returned, and the argument
// checks and routing a call makes before it runs (the registry of requests
// in flight is api/requests.hpp's). Nothing below these files throws across
// them, and nothing here knows UCX.

#include <atomic>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>

#include "api/requests.hpp"
#include "comm/communicator.hpp"
#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

#define RR_API extern "C" __attribute__((visibility("default")))

struct rrComm {
  std::unique_ptr<rr::Communicator> impl;
  // Threads inside a call on this communicator; rrCommAbort waits for them
  // to leave before it frees anything.
  std::atomic<int> users{0};
  // rrCommSetCompletionCallback's, for the Async calls made while it is set.
  struct Completion {
    rrCompletionFn_t fn = nullptr;
    void* user_data = nullptr;
  };
  std::mutex completion_mutex{};
  Completion completion{};
  Completion completion_now() {
    std::lock_guard<std::mutex> lock(completion_mutex);
    return completion;
  }
};

struct rrRequest {
  rrComm_t comm;
  bool is_send;
  int peer;        // as posted: RR_ANY_SOURCE for an any-source receive (then done.peer names the sender)
  int tag = 0;
  int rank = -1;   // this rank: a send's status names it as the source
  size_t elem = 1; // bytes per element, for the status's count
  size_t bytes;
  rr::transport::Completion done;                 // point-to-point requests
  std::shared_ptr<rr::AsyncOperation> operation;  // collective requests
  // Set by rrCommAbort, which frees the communicator: the request's outcome,
  // for the rrTest / rrWait that releases it.
  bool orphaned = false;
  rr::Status outcome;
};

namespace rr::api {

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

// Records the error where rrGetLastError finds it: on the communicator when
// there is one, and on the calling thread always (lifecycle.cpp).
rrResult_t fail(rrComm_t comm, const rr::Status& status);
rrResult_t fail(rrComm_t comm, rr::Code code, const std::string& message);

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

// Argument checks (routing.cpp). Each returns a status whose message names
// the call and the argument at fault.

// The checks every collective shares: comm, dtype, op (when it has one), stream.
rr::Status check_call(const char* call, rrComm_t comm, rrDataType_t datatype, const rrRedOp_t* op, void* stream);
// sendbuff and recvbuff of `count` elements each: not NULL unless count is 0,
// equal (in place) or disjoint.
rr::Status check_buffers(const char* call, const void* sendbuff, const void* recvbuff, size_t count,
                         rrDataType_t datatype);
// A buffer of `nranks` blocks and one of a single block of `count` elements,
// which may only overlap the first exactly at block `rank` (the in-place form).
rr::Status check_blocks(const char* call, const char* big_name, const void* big, int nranks,
                        const char* small_name, const void* small, size_t small_count, int rank, size_t elem);
// A buffer of `count` elements of `elem` bytes at `buf` that could exist: its
// size fits size_t and it ends within the address space a process can have.
rr::Status check_extent(const char* call, const char* name, const void* buf, size_t count, size_t elem);
// `buf` is not NULL unless count is 0.
rr::Status need(const char* call, const char* name, const void* buf, size_t count, size_t elem);
rr::Status check_root(const char* call, rrComm_t comm, int root);

// How a call runs: on the calling thread, blocking (host buffers and no
// stream), or ordered on a stream (a stream, or device buffers: then through
// the staging pipeline; comm/stream_order.hpp).
struct Route {
  bool stream_ordered = false;
  bool staged = false;
  int device = -1;                       // the device buffers' GPU
  const char* device_buffer = nullptr;  // the first of them, for a call that refuses them
};

struct Buffer {
  const char* name;
  const void* ptr;
};

// Classifies the buffers this rank uses (NULL ones are skipped). Device
// buffers are refused beside host buffers (mixed calls are not staged); an
// Async form's are ordered on the legacy default stream (dispatch_routed).
rr::Status route(const char* call, void* stream, std::initializer_list<Buffer> buffers, Route* out);

// Point-to-point takes host buffers and no stream.
rr::Status host_only(const char* call, const char* name, const void* buf, void* stream);

// For an Async call made under a completion callback: calls it with the
// outcome, then releases the request (requests.cpp).
rr::AsyncOperation::OnDone complete_by_callback(rrRequest_t request, rrComm::Completion completion);

// A collective's per-call config (rrCollConfig_t; NULL: none) as the
// settings the communicator runs the call under. Refused naming the field
// when it was not made from RR_COLL_CONFIG_INITIALIZER or a value is out of
// range; an algorithm only where `takes_algorithm` (rrAllReduce's forms).
rr::Status check_coll_config(const char* call, const rrCollConfig_t* config, bool takes_algorithm,
                             rr::CallSettings* out);

// Runs a checked collective now (request == NULL) or queues it and hands back
// a request for rrTest / rrWait. `body` captures its arguments by value.
// `own`: the call's own settings (rrCollConfig_t); by default the
// communicator's (for an Async call, those in force now).
template <typename Body>
rrResult_t dispatch(rrComm_t comm, const rr::Status& checked, rrRequest_t* request, Body body,
                    const rr::CallSettings& own = {}) {
  if (!checked.ok()) return fail(comm, checked);
  InComm inside(comm);
  return guarded(comm, [&] {
    rr::Communicator* impl = comm->impl.get();
    if (!request && (own.timeout_ms > 0 || own.forces_algorithm)) {
      return fail(comm, impl->queue().run([&] {
        rr::Communicator::CallScope scope(impl, own);
        return body();
      }));
    }
    if (!request) return fail(comm, impl->queue().run(body));
    auto req = std::make_unique<rrRequest>();
    req->comm = comm;
    // The timeout and the completion callback in force now are the call's,
    // whenever it runs (rrCommSetTimeout, rrCommSetCompletionCallback).
    rr::CallSettings settings = own;
    if (settings.timeout_ms <= 0) settings.timeout_ms = impl->timeout_ms();
    const rrComm::Completion completion = comm->completion_now();
    req->operation = comm->impl->queue().enqueue(
        std::function<rr::Status()>([impl, settings, body] {
          rr::Communicator::CallScope scope(impl, settings);
          return body();
        }),
        completion.fn ? complete_by_callback(req.get(), completion) : nullptr,
        /*waited=*/!completion.fn);
    add_live(req.get());
    *request = req.release();
    // Registered: the callback may fire (and release the request) from here
    // on; the operation outlives it here.
    const std::shared_ptr<rr::AsyncOperation> operation = (*request)->operation;
    operation->arm();
    return rrSuccess;
  });
}

// As dispatch(), or, for a stream-ordered route, queues the call on the
// stream and returns at once: `staged` for device buffers (nullptr for a call
// without buffers), `body` for host ones. Nothing is wrapped
// for a blocking call: its data path allocates nothing. An Async form's
// device buffers (`request`) are ordered on the legacy default stream, as
// the blocking form's with stream NULL, and its request finishes once the
// result is in place there: a request on the queue, after the call's host
// half, waits for the call's end on the stream.
template <typename Body, typename Staged>
rrResult_t dispatch_routed(rrComm_t comm, const rr::Status& checked, const char* call, const Route& route,
                           void* stream, rrRequest_t* request, Body body, Staged staged,
                           const rr::CallSettings& own = {}) {
  if (!checked.ok() || !route.stream_ordered) return dispatch(comm, checked, request, body, own);
  // One use of `comm` throughout: an abort elsewhere cannot end it between
  // the call's ordering and its request.
  InComm inside(comm);
  std::function<rr::Status()> until_done;
  const rrResult_t ordered = guarded(comm, [&] {
    std::function<rr::StagedCollectives::Plan(const rr::StagedCollectives&)> plan;
    if constexpr (!std::is_same_v<Staged, std::nullptr_t>) {
      if (route.staged) plan = std::move(staged);
    }
    if (!plan) plan = [body](const rr::StagedCollectives&) { return rr::StagedCollectives::host_call(body); };
    return fail(comm, comm->impl->enqueue_on_stream(call, stream, route.device, plan,
                                                    request ? &until_done : nullptr, own));
  });
  if (ordered != rrSuccess || !request) return ordered;
  return dispatch(comm, rr::Status::Ok(), request,
                  [until_done] { return until_done ? until_done() : rr::Status::Ok(); });
}

}  // namespace rr::api
