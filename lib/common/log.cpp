#include "common/log.hpp"

#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace rr {

LogLevel log_level() {
  static const LogLevel level = [] {
    const char* v = std::getenv("RR_DEBUG");
    if (!v) return LogLevel::kWarn;
    if (!strcasecmp(v, "INFO") || !std::strcmp(v, "1")) return LogLevel::kInfo;
    if (!strcasecmp(v, "TRACE") || !std::strcmp(v, "2")) return LogLevel::kTrace;
    return LogLevel::kWarn;
  }();
  return level;
}

}  // namespace rr
