// The C entry points of point-to-point: rrSend / rrRecv (blocking, or
// queued between rrGroupStart and rrGroupEnd), rrIsend / rrIrecv, and the
// requests rrTest / rrWait finish, collective ones included.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/internal.hpp"
#include "api/requests.hpp"
#include "reduce/reduce.hpp"

using namespace rr::api;

namespace {

// Between two polls that hand the communicator's turn back (rrGroupEnd,
// rrWait on a send or receive): yield at first, then sleep briefly, and
// sleep at once when an operation is queued (its worker needs the turn).
void pause_between_polls(int idle_polls, bool queued) {
  if (queued || idle_polls > 64) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  } else {
    std::this_thread::yield();
  }
}

// The calling thread's group: depth of rrGroupStart nesting and the
// communicators holding queued sends and receives, in first-use order.
struct Group {
  int depth = 0;
  std::vector<rrComm_t> comms;
};
thread_local Group group;

}  // namespace

RR_API rrResult_t rrGroupStart(void) {
  ++group.depth;
  return rrSuccess;
}

RR_API rrResult_t rrGroupEnd(void) {
  if (group.depth == 0) return fail(nullptr, rr::Code::kInvalidUsage, "rrGroupEnd without rrGroupStart");
  if (--group.depth > 0) return rrSuccess;
  std::vector<rrComm_t> comms;
  comms.swap(group.comms);
  if (comms.size() == 1) {
    // One communicator with nothing queued: post and wait in one turn.
    rrComm_t comm = comms[0];
    InComm inside(comm);
    rr::Status flushed;
    bool ran = false;
    rrResult_t r = guarded(comm, [&] {
      ran = comm->impl->queue().try_run([&] { return comm->impl->flush_group(); }, &flushed,
                                        /*only_when_idle=*/true);
      return ran ? fail(comm, flushed) : rrSuccess;
    });
    if (ran || r != rrSuccess) return r;
  }
  // Several communicators, or collectives in flight: post on every one,
  // then wait on all of them in turn, a round of progress each, giving the
  // operation queues their turns in between. Finishing one communicator
  // before posting the next would let opposite transfers on two of them
  // wait for each other; holding one communicator for the whole wait would
  // keep an Async collective queued before the group from running, which a
  // peer that already runs its copy waits for (and it for our sends).
  std::deque<InComm> inside;
  std::vector<rrComm_t> pending;
  rrResult_t first = rrSuccess;
  auto note = [&](rrResult_t r) {
    if (first == rrSuccess) first = r;
  };
  for (rrComm_t comm : comms) {
    inside.emplace_back(comm);
    rrResult_t r = guarded(comm, [&] {
      return fail(comm, comm->impl->queue().run([&] { return comm->impl->post_group(); }, /*overtake=*/true));
    });
    note(r);
    if (r == rrSuccess) pending.push_back(comm);
  }
  for (int idle_rounds = 0; !pending.empty();) {
    bool any_finished = false;
    for (size_t i = 0; i < pending.size();) {
      rrComm_t comm = pending[i];
      bool finished = false;
      rrResult_t r = guarded(comm, [&] {
        return fail(comm, comm->impl->queue().run([&] { return comm->impl->poll_group(&finished); },
                                                  /*overtake=*/true));
      });
      note(r);
      if (finished || r != rrSuccess) {
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
        any_finished = true;
      } else {
        ++i;
      }
    }
    idle_rounds = any_finished ? 0 : idle_rounds + 1;
    bool queued = false;
    for (rrComm_t comm : pending) queued = queued || comm->impl->queue().has_queued();
    pause_between_polls(idle_rounds, queued);
  }
  return first;
}

namespace {

static_assert(RR_ANY_SOURCE == rr::transport::kAnySource, "the transport's any-source is the API's");

// A point-to-point call's peer and tag: a rank (RR_ANY_SOURCE too for a
// receive) and a tag of 0..2^31-1.
rr::Status check_peer_and_tag(const char* call, rrComm_t comm, bool is_send, int peer, int tag) {
  if (peer == RR_ANY_SOURCE && is_send) {
    return rr::InvalidArgument(std::string(call) + ": peer=RR_ANY_SOURCE (" + std::to_string(RR_ANY_SOURCE) +
                               ") is for receives only");
  }
  if (peer != RR_ANY_SOURCE && (peer < 0 || peer >= comm->impl->size())) {
    return rr::InvalidArgument(std::string(call) + ": peer=" + std::to_string(peer) + " out of range for " +
                               std::to_string(comm->impl->size()) + " ranks");
  }
  if (tag < 0) {
    return rr::InvalidArgument(std::string(call) + ": tag=" + std::to_string(tag) + " is negative (tags are 0.." +
                               std::to_string(INT32_MAX) + ")");
  }
  return rr::Status::Ok();
}

rrResult_t post_request(const char* call, bool is_send, void* buf, size_t count, rrDataType_t datatype, int peer,
                        int tag, rrComm_t comm, rrRequest_t* request) {
  rr::Status s = check_call(call, comm, datatype, nullptr, nullptr);
  if (s.ok()) s = check_peer_and_tag(call, comm, is_send, peer, tag);
  if (s.ok()) s = need(call, is_send ? "sendbuff" : "recvbuff", buf, count, rr::reduce::dtype_size(datatype));
  if (s.ok()) s = host_only(call, is_send ? "sendbuff" : "recvbuff", buf, nullptr);
  if (s.ok() && !request) s = rr::InvalidArgument(std::string(call) + ": request is NULL");
  if (!s.ok()) return fail(comm, s);
  InComm inside(comm);
  return guarded(comm, [&] {
    auto req = std::make_unique<rrRequest>();
    req->comm = comm;
    req->is_send = is_send;
    req->peer = peer;
    req->tag = tag;
    req->rank = comm->impl->rank();
    req->elem = rr::reduce::dtype_size(datatype);
    req->bytes = count * req->elem;
    // Never behind a running collective (its peer may need this message
    // before it can finish): then the running operation posts it.
    rr::Status posted;
    if (!comm->impl->queue().try_run(
            [&] { return comm->impl->post_p2p(is_send, buf, count, datatype, peer, tag, &req->done); }, &posted)) {
      posted = comm->impl->post_p2p(is_send, buf, count, datatype, peer, tag, &req->done, /*driving=*/false);
    }
    if (!posted.ok()) return fail(comm, posted);
    add_live(req.get());
    *request = req.release();
    return rrSuccess;
  });
}

// What a finished request says about its message (rrStatus_t).
rrStatus_t status_of(const rrRequest& request) {
  if (request.operation) return rrStatus_t{-1, -1, 0};
  const size_t bytes = request.is_send ? request.bytes : request.done.bytes;
  const int source = request.is_send ? request.rank : (request.done.peer >= 0 ? request.done.peer : request.peer);
  return rrStatus_t{source, request.tag, request.elem ? bytes / request.elem : 0};
}

rrResult_t finish_request(const char* call, rrRequest_t request, bool block, int* done, rrStatus_t* status) {
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
    if (status && outcome.ok()) *status = status_of(*request);
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
      const int timeout_ms = comm->impl->timeout_ms();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      for (int polls = 0;; ++polls) {
        s = queue.run([&] {
          return comm->impl->wait_p2p(request->done, request->is_send, request->bytes, request->peer, request->tag,
                                      false, &finished);
        }, /*overtake=*/true);
        if (finished || !s.ok() || !block) break;
        if (comm->impl->aborting()) {
          s = rr::InvalidUsage("the communicator was aborted (rrCommAbort)");
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          const std::string whom =
              request->peer == RR_ANY_SOURCE ? std::string("any rank") : "rank " + std::to_string(request->peer);
          s = rr::Timeout(std::string(request->is_send ? "send of " : "receive of ") + std::to_string(request->bytes) +
                          " bytes " + (request->is_send ? "to " : "from ") + whom +
                          (request->tag ? " (tag " + std::to_string(request->tag) + ")" : std::string()) +
                          " did not finish within " + std::to_string(timeout_ms) + " ms");
          break;
        }
        pause_between_polls(polls, /*queued=*/false);
      }
    }
    if (done) *done = finished ? 1 : 0;
    if (status && finished && s.ok()) *status = status_of(*request);
    // A failed or finished request is released; a pending one stays for the next test or wait.
    if (finished || !s.ok()) {
      // A transfer UCX may still hold is leaked rather than left dangling.
      bool held = false;
      if (!request->operation && !finished) {
        // With the turn: between calls the idle-progress thread may complete it.
        (void)queue.run([&] {  // canceling cannot fail
          if (!request->done.done) comm->impl->transport().cancel(&request->done);
          held = !request->done.done;
          return rr::Status::Ok();
        }, true);
      }
      if (take_if_live(request, true) && !held) delete request;
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
  if (s.ok() && peer == RR_ANY_SOURCE) {
    s = rr::InvalidArgument(std::string(call) + ": peer=RR_ANY_SOURCE: " +
                            (is_send ? "a send needs a peer" : "any-source receives are rrIrecv / rrIrecvTag, whose "
                                                               "rrWaitStatus says who sent"));
  }
  if (s.ok()) s = check_peer_and_tag(call, comm, is_send, peer, 0);
  if (s.ok()) s = need(call, is_send ? "sendbuff" : "recvbuff", buf, count, rr::reduce::dtype_size(datatype));
  if (s.ok()) s = host_only(call, is_send ? "sendbuff" : "recvbuff", buf, stream);
  if (!s.ok()) return fail(comm, s);
  const bool grouped = group.depth > 0;
  if (!grouped && peer != comm->impl->rank()) {
    // Post, then poll in short turns, so queued collectives keep running
    // while this rank waits (its peer may need them before it answers).
    rrRequest_t request = nullptr;
    rrResult_t posted = post_request(call, is_send, buf, count, datatype, peer, 0, comm, &request);
    if (posted != rrSuccess) return posted;
    return finish_request(call, request, true, nullptr, nullptr);
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
  return post_request("rrIsend", true, const_cast<void*>(sendbuff), count, datatype, peer, 0, comm, request);
}

RR_API rrResult_t rrIrecv(void* recvbuff, size_t count, rrDataType_t datatype, int peer, rrComm_t comm,
                          rrRequest_t* request) {
  return post_request("rrIrecv", false, recvbuff, count, datatype, peer, 0, comm, request);
}

RR_API rrResult_t rrIsendTag(const void* sendbuff, size_t count, rrDataType_t datatype, int peer, int tag,
                             rrComm_t comm, rrRequest_t* request) {
  return post_request("rrIsendTag", true, const_cast<void*>(sendbuff), count, datatype, peer, tag, comm, request);
}

RR_API rrResult_t rrIrecvTag(void* recvbuff, size_t count, rrDataType_t datatype, int peer, int tag, rrComm_t comm,
                             rrRequest_t* request) {
  return post_request("rrIrecvTag", false, recvbuff, count, datatype, peer, tag, comm, request);
}

RR_API rrResult_t rrTest(rrRequest_t request, int* done) {
  if (!done) return fail(nullptr, rr::Code::kInvalidArgument, "rrTest: done is NULL");
  return finish_request("rrTest", request, false, done, nullptr);
}

RR_API rrResult_t rrWait(rrRequest_t request) { return finish_request("rrWait", request, true, nullptr, nullptr); }

RR_API rrResult_t rrTestStatus(rrRequest_t request, int* done, rrStatus_t* status) {
  if (!done) return fail(nullptr, rr::Code::kInvalidArgument, "rrTestStatus: done is NULL");
  return finish_request("rrTestStatus", request, false, done, status);
}

RR_API rrResult_t rrWaitStatus(rrRequest_t request, rrStatus_t* status) {
  return finish_request("rrWaitStatus", request, true, nullptr, status);
}
