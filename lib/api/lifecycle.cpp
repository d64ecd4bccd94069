// The C entry points of a communicator's life: version and error text, init,
// split, destroy, abort, dump, and what a communicator reports about itself.

#include <cerrno>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>
#include <unordered_set>

#include "api/internal.hpp"
#include "api/requests.hpp"
#include "api/setup.hpp"
#include "reduce/reduce.hpp"

namespace rr::api {

thread_local std::string thread_last_error;

rrResult_t fail(rrComm_t comm, const rr::Status& status) {
  if (status.ok()) return rrSuccess;
  thread_last_error = status.message();
  if (comm && comm->impl) comm->impl->set_last_error(status.message());
  return rr::to_result(status.code());
}

rrResult_t fail(rrComm_t comm, rr::Code code, const std::string& message) {
  return fail(comm, rr::Status(code, message));
}

}  // namespace rr::api

using namespace rr::api;

namespace {

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

namespace {

// A communicator made from `comm` (split, shrink, grow): `comm`'s settings,
// its timeout as rrCommSetTimeout left it, then what `config` sets.
rr::Status child_settings(rrComm_t comm, const rrConfig_t* config, rr::Settings* settings) {
  *settings = comm->impl->settings();
  settings->timeout_ms = comm->impl->timeout_ms();
  return config ? rr::resolve_settings(config, settings) : rr::Status::Ok();
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
    case rrRevoked: return "the communicator was revoked";
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
    rr::Settings settings;
    if (rr::Status s = child_settings(comm, config, &settings); !s.ok()) return fail(comm, s);
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

RR_API rrResult_t rrCommRevoke(rrComm_t comm) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommRevoke: comm is NULL");
  rr::api::InComm inside(comm);
  rr::Communicator& impl = *comm->impl;
  impl.request_revoke();  // a call running on another thread ends at its next still round
  return guarded(comm, [&] {
    // After the running operation (it fails, telling the peers itself), ahead
    // of the queued ones (they find the communicator revoked).
    const rr::Status told = impl.queue().run([&] { return impl.finish_revoke(); }, /*overtake=*/true);
    return told.ok() ? rrSuccess : fail(comm, told);
  });
}

RR_API rrResult_t rrCommShrink(rrComm_t comm, const int* excludeRanks, int nExclude, rrComm_t* newcomm,
                               const rrConfig_t* config) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommShrink: comm is NULL");
  if (!newcomm) return fail(comm, rr::Code::kInvalidArgument, "rrCommShrink: newcomm is NULL");
  if (nExclude < 0) {
    return fail(comm, rr::Code::kInvalidArgument, "rrCommShrink: nExclude is " + std::to_string(nExclude) + ", below 0");
  }
  if (nExclude > 0 && !excludeRanks) {
    return fail(comm, rr::Code::kInvalidArgument, "rrCommShrink: excludeRanks is NULL, but nExclude is " +
                                                      std::to_string(nExclude));
  }
  *newcomm = nullptr;
  return guarded(comm, [&] {
    rr::Settings settings;
    if (rr::Status s = child_settings(comm, config, &settings); !s.ok()) return fail(comm, s);
    const std::vector<int> exclude(excludeRanks, excludeRanks + nExclude);
    std::unique_ptr<rr::Communicator> child;
    InComm inside(comm);
    rr::Status s = comm->impl->queue().run([&] { return comm->impl->shrink(exclude, settings, &child); });
    if (!s.ok()) return fail(comm, s);
    *newcomm = new rrComm{std::move(child)};
    register_comm(*newcomm);
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommShrinkFailed(rrComm_t comm, rrComm_t* newcomm, int* excludedRanks, int* nExcluded,
                                     const rrConfig_t* config) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommShrinkFailed: comm is NULL");
  if (!newcomm) return fail(comm, rr::Code::kInvalidArgument, "rrCommShrinkFailed: newcomm is NULL");
  *newcomm = nullptr;
  if (nExcluded) *nExcluded = 0;
  return guarded(comm, [&] {
    rr::Settings settings;
    if (rr::Status s = child_settings(comm, config, &settings); !s.ok()) return fail(comm, s);
    std::unique_ptr<rr::Communicator> child;
    std::vector<int> excluded;
    InComm inside(comm);
    rr::Status s = comm->impl->queue().run([&] { return comm->impl->shrink_failed(settings, &child, &excluded); });
    if (excludedRanks) std::copy(excluded.begin(), excluded.end(), excludedRanks);
    if (nExcluded) *nExcluded = static_cast<int>(excluded.size());
    if (!s.ok()) return fail(comm, s);
    *newcomm = new rrComm{std::move(child)};
    register_comm(*newcomm);
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommAgreeFailed(rrComm_t comm, int* failedRanks, int* nFailed) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommAgreeFailed: comm is NULL");
  if (!nFailed) return fail(comm, rr::Code::kInvalidArgument, "rrCommAgreeFailed: nFailed is NULL");
  *nFailed = 0;
  return guarded(comm, [&] {
    std::vector<int> failed;
    const int timeout_ms = comm->impl->timeout_ms();
    InComm inside(comm);
    rr::Status s = comm->impl->queue().run([&] { return comm->impl->agree_on_failed(timeout_ms, &failed); });
    if (!s.ok()) return fail(comm, rr::Status(s.code(), "rrCommAgreeFailed: " + s.message()));
    if (failedRanks) std::copy(failed.begin(), failed.end(), failedRanks);
    *nFailed = static_cast<int>(failed.size());
    return rrSuccess;
  });
}

RR_API rrResult_t rrCommGetUniqueId(rrComm_t comm, rrUniqueId* uniqueId) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommGetUniqueId: comm is NULL");
  if (!uniqueId) return fail(comm, rr::Code::kInvalidArgument, "rrCommGetUniqueId: uniqueId is NULL");
  return guarded(comm, [&] {
    // Rank 0 makes it (and serves its rendezvous); the others wait for it in
    // the broadcast, which also tells them when rank 0 could not.
    rr::Status made = comm->impl->rank() == 0 ? rr::setup::unique_id(uniqueId) : rr::Status::Ok();
    InComm inside(comm);
    rr::Status s = comm->impl->queue().run([&] { return comm->impl->share_unique_id(made, uniqueId); });
    return s.ok() ? rrSuccess : fail(comm, s);
  });
}

RR_API rrResult_t rrCommGrow(rrComm_t comm, int nranks, rrUniqueId uniqueId, rrComm_t* newcomm,
                             const rrConfig_t* config) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommGrow: comm is NULL");
  if (!newcomm) return fail(comm, rr::Code::kInvalidArgument, "rrCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  const int size = comm->impl->size();
  if (nranks <= size) {
    return fail(comm, rr::Code::kInvalidArgument, "rrCommGrow: nranks is " + std::to_string(nranks) +
                                                      ", not more than the communicator's " + std::to_string(size) +
                                                      " ranks");
  }
  return guarded(comm, [&] {
    rr::Settings settings;
    if (rr::Status s = child_settings(comm, config, &settings); !s.ok()) return fail(comm, s);
    {
      InComm inside(comm);
      rr::Status s = comm->impl->queue().run([&] { return comm->impl->agree_on_growth(nranks, uniqueId); });
      if (!s.ok()) return fail(comm, s);
    }
    // The new communicator's rendezvous: comm's ranks at their numbers, the
    // new processes (rrCommInitRank) after them.
    std::unique_ptr<rr::Communicator> child;
    rr::Status s = rr::setup::grown(uniqueId, nranks, comm->impl->rank(), settings, &child);
    if (!s.ok()) return fail(comm, rr::Status(s.code(), "rrCommGrow: " + s.message()));
    *newcomm = new rrComm{std::move(child)};
    register_comm(*newcomm);
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

RR_API rrResult_t rrCommSetTimeout(rrComm_t comm, int timeout_ms) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommSetTimeout: comm is NULL");
  if (timeout_ms < 1) {
    return fail(comm, rr::Code::kInvalidArgument,
                "rrCommSetTimeout: timeout_ms=" + std::to_string(timeout_ms) + ": must be >= 1");
  }
  comm->impl->set_timeout(timeout_ms);
  return rrSuccess;
}

RR_API rrResult_t rrCommGetTimeout(const rrComm_t comm, int* timeout_ms) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommGetTimeout: comm is NULL");
  if (!timeout_ms) return fail(comm, rr::Code::kInvalidArgument, "rrCommGetTimeout: timeout_ms is NULL");
  *timeout_ms = comm->impl->timeout_ms();
  return rrSuccess;
}

RR_API rrResult_t rrCommSetCompletionCallback(rrComm_t comm, rrCompletionFn_t fn, void* user_data) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "rrCommSetCompletionCallback: comm is NULL");
  std::lock_guard<std::mutex> lock(comm->completion_mutex);
  comm->completion = rrComm::Completion{fn, fn ? user_data : nullptr};
  return rrSuccess;
}

RR_API rrResult_t rrCommGetPeerBytes(const rrComm_t comm, int peer, uint64_t* bytes_sent, uint64_t* bytes_received) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (peer < 0 || peer >= comm->impl->size()) {
    return fail(comm, rr::Code::kInvalidArgument,
                "peer=" + std::to_string(peer) + " out of range for " + std::to_string(comm->impl->size()) + " ranks");
  }
  if (!bytes_sent || !bytes_received) return fail(comm, rr::Code::kInvalidArgument, "bytes_sent or bytes_received is NULL");
  *bytes_sent = comm->impl->bytes_sent(peer);
  *bytes_received = comm->impl->bytes_received(peer);
  return rrSuccess;
}

RR_API rrResult_t rrCommGetPoolStats(const rrComm_t comm, size_t* pool_bytes, uint64_t* allocations) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!pool_bytes || !allocations) return fail(comm, rr::Code::kInvalidArgument, "pool_bytes or allocations is NULL");
  *pool_bytes = comm->impl->pool().bytes();
  *allocations = comm->impl->pool().allocations();
  return rrSuccess;
}

RR_API rrResult_t rrCommGetAlgorithm(const rrComm_t comm, const char* collective, size_t count, rrDataType_t datatype,
                                     const char** algorithm) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!collective) return fail(comm, rr::Code::kInvalidArgument, "collective is NULL");
  if (!algorithm) return fail(comm, rr::Code::kInvalidArgument, "algorithm is NULL");
  if (!rr::reduce::valid_dtype(static_cast<int>(datatype))) {
    return fail(comm, rr::Code::kInvalidArgument,
                "datatype=" + std::to_string(static_cast<int>(datatype)) + " is not an rrDataType_t");
  }
  static const struct {
    const char* name;
    rr::exec::Collective collective;
  } kNames[] = {
      {"allreduce", rr::exec::Collective::kAllReduce}, {"reducescatter", rr::exec::Collective::kReduceScatter},
      {"allgather", rr::exec::Collective::kAllGather}, {"broadcast", rr::exec::Collective::kBroadcast},
      {"reduce", rr::exec::Collective::kReduce},       {"gather", rr::exec::Collective::kGather},
      {"scatter", rr::exec::Collective::kScatter},     {"alltoall", rr::exec::Collective::kAllToAll},
      {"alltoallv", rr::exec::Collective::kAllToAllv}, {"barrier", rr::exec::Collective::kBarrier},
  };
  for (const auto& entry : kNames) {
    if (std::strcmp(entry.name, collective) == 0) {
      *algorithm = comm->impl->algorithm_name(entry.collective, count, datatype);
      return rrSuccess;
    }
  }
  return fail(comm, rr::Code::kInvalidArgument,
              std::string("collective=\"") + collective +
                  "\": expected allreduce, reducescatter, allgather, broadcast, reduce, gather, scatter, alltoall, "
                  "alltoallv or barrier");
}

RR_API rrResult_t rrCommGetRingOrder(const rrComm_t comm, int* order) {
  if (!comm) return fail(nullptr, rr::Code::kInvalidArgument, "comm is NULL");
  if (!order) return fail(comm, rr::Code::kInvalidArgument, "order is NULL");
  const std::vector<int> ring = comm->impl->ring_order();
  for (size_t p = 0; p < ring.size(); ++p) order[p] = ring[p];
  return rrSuccess;
}
