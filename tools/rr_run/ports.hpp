#pragma once
// The rendezvous port rr-run hands its ranks when none is given.

#include <string>

namespace rr::run {

// A port on `addr` that nothing listens on now, or 0 with `error` saying why.
int pick_free_port(const std::string& addr, std::string& error);

}  // namespace rr::run
