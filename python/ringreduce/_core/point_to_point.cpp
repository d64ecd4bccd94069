// Sends and receives: blocking ones through rrSend / rrRecv (which a group
// defers to rrGroupEnd), tagged, any-source and non-blocking ones as
// rrIsendTag / rrIrecvTag requests, whose Status says who sent what.

#include "point_to_point.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"
#include "errors.hpp"
#include "prepared_call.hpp"
#include "request.hpp"

namespace ringreduce_core {

namespace {

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

// A send or receive as a tagged request (rrIsendTag / rrIrecvTag), whose
// Status says who sent what; the tag's range is the engine's to check.
Prepared prep_p2p(bool is_send, py::handle buf, int peer, int tag, const char* call) {
  Prepared p;
  Buffer b = Buffer::acquire(buf, call, "buf", !is_send);
  void* ptr = b.data();
  const size_t count = b.count();
  const rrDataType_t dt = b.element().dtype;
  p.buffers.push_back(std::move(b));
  p.has_status = true;
  p.run = [=](rrComm_t c, rrRequest_t* r, const rrCollConfig_t*) {
    return is_send ? rrIsendTag(ptr, count, dt, peer, tag, c, r) : rrIrecvTag(ptr, count, dt, peer, tag, c, r);
  };
  return p;
}

// A blocking send or receive: rrSend / rrRecv (which a group defers), or,
// for a tagged or any-source one outside a group, the request form waited at
// once. Returns the Status of the message.
py::object p2p_blocking(const CommPtr& st, bool is_send, py::handle buf, int peer, int tag) {
  const char* call = is_send ? "send" : "recv";
  GroupState& group = group_state();
  const bool tagged = tag != 0 || peer < 0;
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

}  // namespace

void bind_point_to_point(py::module_& m, CommClass& comm) {
  m.attr("ANY_SOURCE") = static_cast<int>(RR_ANY_SOURCE);

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

  // Blocking and non-blocking sends and receives.
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

}  // namespace ringreduce_core
