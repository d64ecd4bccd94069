#pragma once
// The registry of requests in flight: every rrRequest_t issued (a queued
// collective's, api/internal.hpp's dispatch(); a point-to-point one's,
// api/point_to_point.cpp) and not yet finished by rrTest / rrWait. A wait on
// anything else (a request already finished, or never issued) is refused,
// not followed; rrCommDestroy refuses while one of its communicator's is
// here, and rrCommAbort marks them (api/lifecycle.cpp). One process-wide
// set behind one mutex: handles are process-wide, as NCCL's are.

#include <mutex>
#include <unordered_set>

#include "ringreduce/ringreduce.h"

namespace rr::api {

// The lock every look at the set takes: finish_request and rrCommAbort
// decide under it whether a request is orphaned (api/internal.hpp's rrRequest).
std::mutex& requests_mutex();
std::unordered_set<rrRequest_t>& live_requests();
// Adds `request` (under the lock).
void add_live(rrRequest_t request);
// Whether `request` is in flight; with `erase`, it no longer is.
bool take_if_live(rrRequest_t request, bool erase);

}  // namespace rr::api
