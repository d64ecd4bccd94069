// Running a prepared call blocking or as a request.

#include "prepared_call.hpp"

#include <memory>
#include <utility>

namespace ringreduce_core {

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

}  // namespace ringreduce_core
