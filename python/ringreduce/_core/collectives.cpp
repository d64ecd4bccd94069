// The collectives as ringreduce.Comm's methods: each converts its buffers
// (checking them against each other and the communicator's size), resolves
// its op, and runs the C call blocking or, in its i- form, as a request.

#include "collectives.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "prepared_call.hpp"

namespace ringreduce_core {

namespace {

// ---- argument conversion ---------------------------------------------------

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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrAllReduceAsyncConfig(send_ptr, recv_ptr, count, dt, rop, c, r, cfg)
             : rrAllReduceConfig(send_ptr, recv_ptr, count, dt, rop, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrReduceScatterAsyncConfig(send_ptr, recv_ptr, count, dt, rop, c, r, cfg)
             : rrReduceScatterConfig(send_ptr, recv_ptr, count, dt, rop, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrAllGatherAsyncConfig(send_ptr, recv_ptr, count, dt, c, r, cfg)
             : rrAllGatherConfig(send_ptr, recv_ptr, count, dt, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrBroadcastAsyncConfig(send_ptr, recv_ptr, count, dt, root, c, r, cfg)
             : rrBroadcastConfig(send_ptr, recv_ptr, count, dt, root, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrReduceAsyncConfig(send_ptr, recv_ptr, count, dt, rop, root, c, r, cfg)
             : rrReduceConfig(send_ptr, recv_ptr, count, dt, rop, root, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrGatherAsyncConfig(send_ptr, recv_ptr, count, dt, root, c, r, cfg)
             : rrGatherConfig(send_ptr, recv_ptr, count, dt, root, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrScatterAsyncConfig(send_ptr, recv_ptr, count, dt, root, c, r, cfg)
             : rrScatterConfig(send_ptr, recv_ptr, count, dt, root, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrAllToAllAsyncConfig(send_ptr, recv_ptr, count, dt, c, r, cfg)
             : rrAllToAllConfig(send_ptr, recv_ptr, count, dt, c, nullptr, cfg);
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
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrAllToAllvAsyncConfig(send_ptr, a, a + n, recv_ptr, a + 2 * n, a + 3 * n, dt, c, r, cfg)
             : rrAllToAllvConfig(send_ptr, a, a + n, recv_ptr, a + 2 * n, a + 3 * n, dt, c, nullptr, cfg);
  };
  return p;
}

Prepared prep_barrier() {
  Prepared p;
  p.run = [](rrComm_t c, rrRequest_t* r, const rrCollConfig_t* cfg) {
    return r ? rrBarrierAsyncConfig(c, r, cfg) : rrBarrierConfig(c, nullptr, cfg);
  };
  return p;
}

// Docstrings shared by each blocking collective and its non-blocking form.
constexpr const char* kReturnsRequest =
    "\n\nNon-blocking: returns a Request at once; the call runs on the communicator's worker thread in "
    "issue order (the same on every rank). The Request keeps the buffers alive; do not touch them until "
    "it finished (Request.wait / Request.test).";

// Every collective takes timeout= (keyword only).
constexpr const char* kTimeout =
    "\n\ntimeout: this call's own deadline in seconds (its per-call config, rrCollConfig_t): it fails with "
    "TimeoutError within about 0.5 s of it, whatever the communicator's timeout; None: the communicator's.";

// allreduce's and iallreduce's own.
constexpr const char* kAlgorithm =
    "\n\nalgorithm: this call's schedule, as RR_ALGO spells it (\"ring\", \"rd\", \"hd\", \"oneshot\", "
    "\"auto\"); every rank must pass the same (ranks that differ fail the call saying so). None: the "
    "communicator's.";

std::string with_timeout(const char* doc) { return std::string(doc) + kTimeout; }
std::string nonblocking_doc(const char* blocking_doc) { return with_timeout(blocking_doc) + kReturnsRequest; }

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

void bind_collectives(CommClass& comm) {
  // The blocking and non-blocking forms share the conversion.
  comm.def("allreduce", [](CommState& s, py::object send, py::object recv, py::object op,
                           std::optional<double> timeout, std::optional<std::string> algorithm) {
        Prepared p = prep_allreduce(s, send, recv, op, "allreduce");
        run_blocking(s, "allreduce", p, timeout, algorithm);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::kw_only(), py::arg("timeout") = py::none(),
         py::arg("algorithm") = py::none(), (with_timeout(kAllreduceDoc) + kAlgorithm).c_str())
      .def("iallreduce", [](const CommPtr& s, py::object send, py::object recv, py::object op,
                            std::optional<double> timeout, std::optional<std::string> algorithm) {
        Prepared p = prep_allreduce(*s, send, recv, op, "iallreduce");
        return run_async(s, "iallreduce", p, timeout, algorithm);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::kw_only(), py::arg("timeout") = py::none(),
         py::arg("algorithm") = py::none(), (nonblocking_doc(kAllreduceDoc) + kAlgorithm).c_str())
      .def("reduce_scatter", [](CommState& s, py::object send, py::object recv, py::object op, std::optional<double> timeout) {
        Prepared p = prep_reduce_scatter(s, send, recv, op, "reduce_scatter");
        run_blocking(s, "reduce_scatter", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kReduceScatterDoc).c_str())
      .def("ireduce_scatter", [](const CommPtr& s, py::object send, py::object recv, py::object op, std::optional<double> timeout) {
        Prepared p = prep_reduce_scatter(*s, send, recv, op, "ireduce_scatter");
        return run_async(s, "ireduce_scatter", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kReduceScatterDoc).c_str())
      .def("allgather", [](CommState& s, py::object send, py::object recv, std::optional<double> timeout) {
        Prepared p = prep_allgather(s, send, recv, "allgather");
        run_blocking(s, "allgather", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kAllgatherDoc).c_str())
      .def("iallgather", [](const CommPtr& s, py::object send, py::object recv, std::optional<double> timeout) {
        Prepared p = prep_allgather(*s, send, recv, "iallgather");
        return run_async(s, "iallgather", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kAllgatherDoc).c_str())
      .def("broadcast", [](CommState& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_broadcast(s, send, recv, root, "broadcast");
        run_blocking(s, "broadcast", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kBroadcastDoc).c_str())
      .def("ibroadcast", [](const CommPtr& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_broadcast(*s, send, recv, root, "ibroadcast");
        return run_async(s, "ibroadcast", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kBroadcastDoc).c_str())
      .def("reduce", [](CommState& s, py::object send, py::object recv, py::object op, int root, std::optional<double> timeout) {
        Prepared p = prep_reduce(s, send, recv, op, root, "reduce");
        run_blocking(s, "reduce", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kReduceDoc).c_str())
      .def("ireduce", [](const CommPtr& s, py::object send, py::object recv, py::object op, int root, std::optional<double> timeout) {
        Prepared p = prep_reduce(*s, send, recv, op, root, "ireduce");
        return run_async(s, "ireduce", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("op") = "sum", py::arg("root") = 0,
         py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kReduceDoc).c_str())
      .def("gather", [](CommState& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_gather(s, send, recv, root, "gather");
        run_blocking(s, "gather", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kGatherDoc).c_str())
      .def("igather", [](const CommPtr& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_gather(*s, send, recv, root, "igather");
        return run_async(s, "igather", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kGatherDoc).c_str())
      .def("scatter", [](CommState& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_scatter(s, send, recv, root, "scatter");
        run_blocking(s, "scatter", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kScatterDoc).c_str())
      .def("iscatter", [](const CommPtr& s, py::object send, py::object recv, int root, std::optional<double> timeout) {
        Prepared p = prep_scatter(*s, send, recv, root, "iscatter");
        return run_async(s, "iscatter", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("root") = 0, py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kScatterDoc).c_str())
      .def("alltoall", [](CommState& s, py::object send, py::object recv, std::optional<double> timeout) {
        Prepared p = prep_alltoall(s, send, recv, "alltoall");
        run_blocking(s, "alltoall", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kAlltoallDoc).c_str())
      .def("ialltoall", [](const CommPtr& s, py::object send, py::object recv, std::optional<double> timeout) {
        Prepared p = prep_alltoall(*s, send, recv, "ialltoall");
        return run_async(s, "ialltoall", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kAlltoallDoc).c_str())
      .def("alltoallv", [](CommState& s, py::object send, py::object recv, py::object sc, py::object rc,
                           py::object sd, py::object rd, std::optional<double> timeout) {
        Prepared p = prep_alltoallv(s, send, recv, sc, rc, sd, rd, "alltoallv");
        run_blocking(s, "alltoallv", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("sendcounts"), py::arg("recvcounts"),
         py::arg("sdispls") = py::none(), py::arg("rdispls") = py::none(), py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kAlltoallvDoc).c_str())
      .def("ialltoallv", [](const CommPtr& s, py::object send, py::object recv, py::object sc, py::object rc,
                            py::object sd, py::object rd, std::optional<double> timeout) {
        Prepared p = prep_alltoallv(*s, send, recv, sc, rc, sd, rd, "ialltoallv");
        return run_async(s, "ialltoallv", p, timeout);
      }, py::arg("sendbuf"), py::arg("recvbuf"), py::arg("sendcounts"), py::arg("recvcounts"),
         py::arg("sdispls") = py::none(), py::arg("rdispls") = py::none(), py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kAlltoallvDoc).c_str())
      .def("barrier", [](CommState& s, std::optional<double> timeout) {
        Prepared p = prep_barrier();
        run_blocking(s, "barrier", p, timeout);
      }, py::kw_only(), py::arg("timeout") = py::none(), with_timeout(kBarrierDoc).c_str())
      .def("ibarrier", [](const CommPtr& s, std::optional<double> timeout) {
        Prepared p = prep_barrier();
        return run_async(s, "ibarrier", p, timeout);
      }, py::kw_only(), py::arg("timeout") = py::none(), nonblocking_doc(kBarrierDoc).c_str());
}

}  // namespace ringreduce_core
