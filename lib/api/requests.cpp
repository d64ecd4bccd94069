#include "api/requests.hpp"

#include "api/internal.hpp"

namespace rr::api {

std::mutex& requests_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_set<rrRequest_t>& live_requests() {
  // Never destroyed: a request may be finished from a static destructor.
  static auto* live = new std::unordered_set<rrRequest_t>();
  return *live;
}

void add_live(rrRequest_t request) {
  std::lock_guard<std::mutex> lock(requests_mutex());
  live_requests().insert(request);
}

bool take_if_live(rrRequest_t request, bool erase) {
  std::lock_guard<std::mutex> lock(requests_mutex());
  auto it = live_requests().find(request);
  if (it == live_requests().end()) return false;
  if (erase) live_requests().erase(it);
  return true;
}

rr::AsyncOperation::OnDone complete_by_callback(rrRequest_t request, rrComm::Completion completion) {
  return [request, completion](const rr::Status& status) {
    // Out of the registry first: once the caller hears, nothing of the call
    // is in flight (rrCommDestroy may follow at once).
    const bool live = take_if_live(request, true);
    completion.fn(request, rr::to_result(status.code()), status.message().c_str(), completion.user_data);
    if (live) delete request;
  };
}

}  // namespace rr::api
