#include "exec/wait_policy.hpp"

#include <cstdlib>
#include <cstring>

namespace rr::exec {

bool parse_wait_mode(const char* text, WaitMode* out) {
  if (std::strcmp(text, "sleep") == 0) return *out = WaitMode::kSleep, true;
  if (std::strcmp(text, "yield") == 0) return *out = WaitMode::kYield, true;
  if (std::strcmp(text, "spin") == 0) return *out = WaitMode::kSpin, true;
  return false;
}

WaitMode wait_mode() {
  // A bad value is refused when a communicator is made (comm/settings.cpp);
  // here it keeps the default.
  static const WaitMode mode = [] {
    WaitMode m = WaitMode::kSleep;
    if (const char* v = std::getenv("RR_WAIT_POLICY")) (void)parse_wait_mode(v, &m);
    return m;
  }();
  return mode;
}

}  // namespace rr::exec
