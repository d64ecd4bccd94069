#include "api/requests.hpp"

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

}  // namespace rr::api
