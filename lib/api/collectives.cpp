// The C entry points of the collectives, blocking, stream-ordered and Async:
// each checks its arguments, routes the call (routing.cpp) and hands the
// communicator a body that runs it.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/internal.hpp"
#include "reduce/reduce.hpp"

using namespace rr::api;

static rrResult_t reduce_scatter_call(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrReduceScatter", comm, datatype, &op, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrReduceScatter", config, false, &own);
  if (s.ok()) {
    s = check_blocks("rrReduceScatter", "sendbuff", sendbuff, comm->impl->size(), "recvbuff",
                     recvbuff, recvcount, comm->impl->rank(), rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) s = route("rrReduceScatter", stream, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrReduceScatter", r, stream, request,
      [=] { return comm->impl->reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op); },
      [=](const rr::StagedCollectives& staged) { return staged.reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op); }, own);
}

static rrResult_t all_gather_call(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrAllGather", comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrAllGather", config, false, &own);
  if (s.ok()) {
    s = check_blocks("rrAllGather", "recvbuff", recvbuff, comm->impl->size(), "sendbuff", sendbuff,
                     sendcount, comm->impl->rank(), rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) s = route("rrAllGather", stream, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllGather", r, stream, request,
      [=] { return comm->impl->all_gather(sendbuff, recvbuff, sendcount, datatype); },
      [=](const rr::StagedCollectives& staged) { return staged.all_gather(sendbuff, recvbuff, sendcount, datatype); }, own);
}

static rrResult_t all_reduce_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrAllReduce", comm, datatype, &op, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrAllReduce", config, true, &own);
  if (s.ok()) s = check_buffers("rrAllReduce", sendbuff, recvbuff, count, datatype);
  Route r;
  if (s.ok()) s = route("rrAllReduce", stream, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllReduce", r, stream, request,
      [=] { return comm->impl->allreduce(sendbuff, recvbuff, count, datatype, op); },
      [=](const rr::StagedCollectives& staged) { return staged.allreduce(sendbuff, recvbuff, count, datatype, op); }, own);
}

static rrResult_t broadcast_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrBroadcast", comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrBroadcast", config, false, &own);
  if (s.ok()) s = check_root("rrBroadcast", comm, root);
  const size_t elem = rr::reduce::dtype_size(datatype);
  if (s.ok() && comm->impl->rank() == root) s = need("rrBroadcast", "sendbuff (on the root)", sendbuff, count, elem);
  if (s.ok()) s = need("rrBroadcast", "recvbuff", recvbuff, count, elem);
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrBroadcast", stream,
              {{"sendbuff", is_root ? sendbuff : nullptr}, {"recvbuff", recvbuff}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrBroadcast", r, stream, request,
      [=] { return comm->impl->broadcast(sendbuff, recvbuff, count, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.broadcast(sendbuff, recvbuff, count, datatype, root); }, own);
}

static rrResult_t reduce_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrReduce", comm, datatype, &op, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrReduce", config, false, &own);
  if (s.ok()) s = check_root("rrReduce", comm, root);
  if (s.ok()) s = need("rrReduce", "sendbuff", sendbuff, count, rr::reduce::dtype_size(datatype));
  if (s.ok() && comm->impl->rank() == root) s = check_buffers("rrReduce", sendbuff, recvbuff, count, datatype);
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrReduce", stream,
              {{"sendbuff", sendbuff}, {"recvbuff", is_root ? recvbuff : nullptr}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrReduce", r, stream, request,
      [=] { return comm->impl->reduce(sendbuff, recvbuff, count, datatype, op, root); },
      [=](const rr::StagedCollectives& staged) { return staged.reduce(sendbuff, recvbuff, count, datatype, op, root); }, own);
}

static rrResult_t gather_call(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrGather", comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrGather", config, false, &own);
  if (s.ok()) s = check_root("rrGather", comm, root);
  if (s.ok()) s = need("rrGather", "sendbuff", sendbuff, sendcount, rr::reduce::dtype_size(datatype));
  if (s.ok() && comm->impl->rank() == root) {
    s = check_blocks("rrGather", "recvbuff", recvbuff, comm->impl->size(), "sendbuff", sendbuff, sendcount, root,
                     rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrGather", stream,
              {{"sendbuff", sendbuff}, {"recvbuff", is_root ? recvbuff : nullptr}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrGather", r, stream, request,
      [=] { return comm->impl->gather(sendbuff, recvbuff, sendcount, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.gather(sendbuff, recvbuff, sendcount, datatype, root); }, own);
}

static rrResult_t scatter_call(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrScatter", comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrScatter", config, false, &own);
  if (s.ok()) s = check_root("rrScatter", comm, root);
  if (s.ok()) s = need("rrScatter", "recvbuff", recvbuff, recvcount, rr::reduce::dtype_size(datatype));
  if (s.ok() && comm->impl->rank() == root) {
    s = check_blocks("rrScatter", "sendbuff", sendbuff, comm->impl->size(), "recvbuff", recvbuff, recvcount, root,
                     rr::reduce::dtype_size(datatype));
  }
  Route r;
  if (s.ok()) {
    const bool is_root = comm->impl->rank() == root;
    s = route("rrScatter", stream,
              {{"sendbuff", is_root ? sendbuff : nullptr}, {"recvbuff", recvbuff}}, &r);
  }
  return dispatch_routed(
      comm, s, "rrScatter", r, stream, request,
      [=] { return comm->impl->scatter(sendbuff, recvbuff, recvcount, datatype, root); },
      [=](const rr::StagedCollectives& staged) { return staged.scatter(sendbuff, recvbuff, recvcount, datatype, root); }, own);
}

static rrResult_t all_to_all_call(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrAllToAll", comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrAllToAll", config, false, &own);
  if (s.ok()) {
    const size_t n = static_cast<size_t>(comm->impl->size());
    const size_t elem = rr::reduce::dtype_size(datatype);
    if (count > SIZE_MAX / elem / n) {
      s = rr::InvalidArgument("rrAllToAll: count=" + std::to_string(count) + " overflows");
    } else {
      s = need("rrAllToAll", "sendbuff", sendbuff, count * n, elem);
      if (s.ok()) s = need("rrAllToAll", "recvbuff", recvbuff, count * n, elem);
      const auto a = reinterpret_cast<uintptr_t>(sendbuff);
      const auto b = reinterpret_cast<uintptr_t>(recvbuff);
      const size_t bytes = count * n * elem;
      if (s.ok() && count > 0 && a < b + bytes && b < a + bytes) {
        s = rr::InvalidArgument("rrAllToAll: sendbuff and recvbuff overlap (all-to-all has no in-place form here)");
      }
    }
  }
  Route r;
  if (s.ok()) s = route("rrAllToAll", stream, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  return dispatch_routed(
      comm, s, "rrAllToAll", r, stream, request,
      [=] { return comm->impl->all_to_all(sendbuff, recvbuff, count, datatype); },
      [=](const rr::StagedCollectives& staged) { return staged.all_to_all(sendbuff, recvbuff, count, datatype); }, own);
}

namespace {

// rrAllToAllv's four arrays, size() entries each. A call that outlives its
// caller's arrays (Async, stream-ordered) points into a copy it owns.
struct BlockLayout {
  const size_t* sendcounts;
  const size_t* sdispls;
  const size_t* recvcounts;
  const size_t* rdispls;
  std::shared_ptr<const std::vector<size_t>> copy;

  void own(size_t n) {
    auto v = std::make_shared<std::vector<size_t>>();
    v->reserve(4 * n);
    for (const size_t* a : {sendcounts, sdispls, recvcounts, rdispls}) v->insert(v->end(), a, a + n);
    sendcounts = v->data();
    sdispls = v->data() + n;
    recvcounts = v->data() + 2 * n;
    rdispls = v->data() + 3 * n;
    copy = std::move(v);
  }
};

// One side of rrAllToAllv: its arrays are given, no block overflows, and
// the buffer is there when a block is not empty. [*lo, *hi) is the byte
// range its nonempty blocks span (lo == hi: none).
rr::Status check_blocks_v(const char* buf_name, const void* buf, const char* counts_name, const size_t* counts,
                          const char* displs_name, const size_t* displs, size_t n, size_t elem, size_t* lo,
                          size_t* hi) {
  const std::string call = "rrAllToAllv: ";
  if (!counts) return rr::InvalidArgument(call + counts_name + " is NULL");
  if (!displs) return rr::InvalidArgument(call + displs_name + " is NULL");
  *lo = SIZE_MAX;
  *hi = 0;
  for (size_t p = 0; p < n; ++p) {
    if (counts[p] == 0) continue;
    const std::string at = "[" + std::to_string(p) + "]";
    if (!buf) {
      return rr::InvalidArgument(call + buf_name + " is NULL with " + counts_name + at + "=" +
                                 std::to_string(counts[p]));
    }
    if (displs[p] > SIZE_MAX - counts[p] || displs[p] + counts[p] > SIZE_MAX / elem) {
      return rr::InvalidArgument(call + displs_name + at + "=" + std::to_string(displs[p]) + " + " + counts_name + at +
                                 "=" + std::to_string(counts[p]) + " overflows");
    }
    *lo = std::min(*lo, displs[p] * elem);
    *hi = std::max(*hi, (displs[p] + counts[p]) * elem);
  }
  if (*hi == 0) *lo = 0;
  return rr::Status::Ok();
}

}  // namespace

static rrResult_t all_to_all_v_call(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                    void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                    rrDataType_t datatype, rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  const char* call = "rrAllToAllv";
  rr::Status s = check_call(call, comm, datatype, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config(call, config, false, &own);
  size_t send_lo = 0, send_hi = 0, recv_lo = 0, recv_hi = 0;
  const size_t n = s.ok() ? static_cast<size_t>(comm->impl->size()) : 0;
  const size_t elem = rr::reduce::dtype_size(datatype);
  if (s.ok()) s = check_blocks_v("sendbuff", sendbuff, "sendcounts", sendcounts, "sdispls", sdispls, n, elem, &send_lo, &send_hi);
  if (s.ok()) s = check_blocks_v("recvbuff", recvbuff, "recvcounts", recvcounts, "rdispls", rdispls, n, elem, &recv_lo, &recv_hi);
  if (s.ok() && send_hi > send_lo && recv_hi > recv_lo) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(sendbuff), b = reinterpret_cast<uintptr_t>(recvbuff);
    if (a + send_lo < b + recv_hi && b + recv_lo < a + send_hi) {
      s = rr::InvalidArgument(std::string(call) + ": the send blocks (sendbuff bytes " + std::to_string(send_lo) + ".." +
                              std::to_string(send_hi) + ") and the receive blocks (recvbuff bytes " +
                              std::to_string(recv_lo) + ".." + std::to_string(recv_hi) +
                              ") overlap (all-to-all-v has no in-place form)");
    }
  }
  // Device buffers are refused below, the Async form's too.
  Route r;
  if (s.ok()) s = route(call, stream, {{"sendbuff", sendbuff}, {"recvbuff", recvbuff}}, &r);
  if (s.ok() && r.staged) {
    s = rr::InvalidArgument(std::string(call) + ": " + r.device_buffer +
                            " is device memory; rrAllToAllv takes host buffers (copy the blocks to the host, or use "
                            "rrAllToAll, which takes device buffers)");
  }
  BlockLayout layout{sendcounts, sdispls, recvcounts, rdispls, nullptr};
  if (s.ok() && (request || r.stream_ordered)) {
    const rrResult_t copied = guarded(comm, [&] {
      layout.own(n);
      return rrSuccess;
    });
    if (copied != rrSuccess) return copied;
  }
  return dispatch_routed(
      comm, s, call, r, stream, request,
      [=] {
        return comm->impl->all_to_all_v(sendbuff, layout.sendcounts, layout.sdispls, recvbuff, layout.recvcounts,
                                        layout.rdispls, datatype);
      },
      nullptr, own);
}

static rrResult_t barrier_call(rrComm_t comm, void* stream, rrRequest_t* request, const rrCollConfig_t* config) {
  rr::Status s = check_call("rrBarrier", comm, rrUint8, nullptr, stream);
  rr::CallSettings own;
  if (s.ok()) s = check_coll_config("rrBarrier", config, false, &own);
  Route r;
  if (s.ok()) s = route("rrBarrier", stream, {}, &r);
  return dispatch_routed(comm, s, "rrBarrier", r, stream, request, [=] { return comm->impl->barrier(); }, nullptr, own);
}

RR_API rrResult_t rrReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream) {
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceScatterAsync: request is NULL");
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, void* stream) {
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllGatherAsync: request is NULL");
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrAllReduce(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream) {
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllReduceAsync: request is NULL");
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrBroadcast(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBroadcastAsync: request is NULL");
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrReduce(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, void* stream) {
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceAsync: request is NULL");
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrGather(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrGatherAsync: request is NULL");
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream) {
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrScatterAsync: request is NULL");
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrAllToAll(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, void* stream) {
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllToAllAsync: request is NULL");
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, nullptr, request, nullptr);
}

RR_API rrResult_t rrAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                              const size_t* recvcounts, const size_t* rdispls, rrDataType_t datatype, rrComm_t comm,
                              void* stream) {
  return all_to_all_v_call(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream,
                           nullptr, nullptr);
}

RR_API rrResult_t rrAllToAllvAsync(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                   void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                   rrDataType_t datatype, rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllToAllvAsync: request is NULL");
  return all_to_all_v_call(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, nullptr,
                           request, nullptr);
}

RR_API rrResult_t rrBarrier(rrComm_t comm, void* stream) {
  return barrier_call(comm, stream, nullptr, nullptr);
}

RR_API rrResult_t rrBarrierAsync(rrComm_t comm, rrRequest_t* request) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBarrierAsync: request is NULL");
  return barrier_call(comm, nullptr, request, nullptr);
}

// The Config forms: the same, with the call's own settings (rrCollConfig_t).

RR_API rrResult_t rrReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, nullptr, config);
}

RR_API rrResult_t rrReduceScatterAsyncConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceScatterAsyncConfig: request is NULL");
  return reduce_scatter_call(sendbuff, recvbuff, recvcount, datatype, op, comm, nullptr, request, config);
}

RR_API rrResult_t rrAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, stream, nullptr, config);
}

RR_API rrResult_t rrAllGatherAsyncConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllGatherAsyncConfig: request is NULL");
  return all_gather_call(sendbuff, recvbuff, sendcount, datatype, comm, nullptr, request, config);
}

RR_API rrResult_t rrAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, stream, nullptr, config);
}

RR_API rrResult_t rrAllReduceAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllReduceAsyncConfig: request is NULL");
  return all_reduce_call(sendbuff, recvbuff, count, datatype, op, comm, nullptr, request, config);
}

RR_API rrResult_t rrBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, stream, nullptr, config);
}

RR_API rrResult_t rrBroadcastAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBroadcastAsyncConfig: request is NULL");
  return broadcast_call(sendbuff, recvbuff, count, datatype, root, comm, nullptr, request, config);
}

RR_API rrResult_t rrReduceConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, stream, nullptr, config);
}

RR_API rrResult_t rrReduceAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op, int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrReduceAsyncConfig: request is NULL");
  return reduce_call(sendbuff, recvbuff, count, datatype, op, root, comm, nullptr, request, config);
}

RR_API rrResult_t rrGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, stream, nullptr, config);
}

RR_API rrResult_t rrGatherAsyncConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrGatherAsyncConfig: request is NULL");
  return gather_call(sendbuff, recvbuff, sendcount, datatype, root, comm, nullptr, request, config);
}

RR_API rrResult_t rrScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, stream, nullptr, config);
}

RR_API rrResult_t rrScatterAsyncConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrScatterAsyncConfig: request is NULL");
  return scatter_call(sendbuff, recvbuff, recvcount, datatype, root, comm, nullptr, request, config);
}

RR_API rrResult_t rrAllToAllConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, stream, nullptr, config);
}

RR_API rrResult_t rrAllToAllAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllToAllAsyncConfig: request is NULL");
  return all_to_all_call(sendbuff, recvbuff, count, datatype, comm, nullptr, request, config);
}

RR_API rrResult_t rrAllToAllvConfig(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                              const size_t* recvcounts, const size_t* rdispls, rrDataType_t datatype, rrComm_t comm,
                              void* stream, const rrCollConfig_t* config) {
  return all_to_all_v_call(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, stream,
                           nullptr, config);
}

RR_API rrResult_t rrAllToAllvAsyncConfig(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                   void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                   rrDataType_t datatype, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrAllToAllvAsyncConfig: request is NULL");
  return all_to_all_v_call(sendbuff, sendcounts, sdispls, recvbuff, recvcounts, rdispls, datatype, comm, nullptr,
                           request, config);
}

RR_API rrResult_t rrBarrierConfig(rrComm_t comm, void* stream, const rrCollConfig_t* config) {
  return barrier_call(comm, stream, nullptr, config);
}

RR_API rrResult_t rrBarrierAsyncConfig(rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config) {
  if (!request) return fail(comm, rr::Code::kInvalidArgument, "rrBarrierAsyncConfig: request is NULL");
  return barrier_call(comm, nullptr, request, config);
}
