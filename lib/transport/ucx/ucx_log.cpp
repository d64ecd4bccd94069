#include "transport/ucx/ucx_log.hpp"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/log.hpp"

namespace rr::transport::ucx_log {

namespace {

std::atomic<int> losses{0};

struct Expected {
  const char* file;     // UCX's source file (base name)
  const char* message;  // the start of its format string
};

// The lines a loss explains (UCX 1.13's wording).
constexpr Expected kExpected[] = {
    {"mm_sysv.c", "shmat("},         // the leaving peer's segment is already removed
    {"mm_posix.c", "open("},         // ... or its file (proc link) already closed
    {"mm_posix.c", "shm_open("},
    {"tag_match.c", "unexpected tag-receive descriptor"},  // what the failed operation never received
    {"mpool.c", "object "},          // "... was not returned to mpool": requests a failure left
};

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool expected(const char* file, const char* format) {
  const char* base = base_name(file);
  for (const Expected& e : kExpected) {
    if (std::strcmp(base, e.file) == 0 && std::strncmp(format, e.message, std::strlen(e.message)) == 0) {
      return true;
    }
  }
  return false;
}

ucs_log_func_rc_t filter(const char* file, unsigned line, const char* /*function*/, ucs_log_level_t level,
                         const ucs_log_component_config_t* /*component*/, const char* format, va_list ap) {
  if (level > UCS_LOG_LEVEL_WARN || losses.load(std::memory_order_acquire) == 0 || !expected(file, format)) {
    return UCS_LOG_FUNC_RC_CONTINUE;
  }
  if (log_level() >= LogLevel::kInfo) {
    char text[512];
    va_list copy;
    va_copy(copy, ap);
    std::vsnprintf(text, sizeof(text), format, copy);
    va_end(copy);
    RR_LOG(LogLevel::kInfo, "UCX, after a peer left (expected): %s:%u %s", base_name(file), line, text);
  }
  return UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(&filter); });
}

void count_loss(int delta) { losses.fetch_add(delta, std::memory_order_acq_rel); }

}  // namespace rr::transport::ucx_log
