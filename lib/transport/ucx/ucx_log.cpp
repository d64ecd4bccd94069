#include "transport/ucx/ucx_log.hpp"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "common/log.hpp"

namespace rr::transport::ucx_log {

namespace {

std::atomic<int> losses{0};

struct Expected {
  const char* file;     // UCX's source file (base name)
  const char* message;  // the start of its format string
  // Attaching to a peer's segment fails with this errno only when the peer
  // has released it, that is, it is leaving or gone: expected even before
  // this process has seen the loss (the engine then names the peer in its
  // own error if the loss matters to a call). 0: expected only after a loss.
  int peer_gone_errno;
};

// peer_gone_errno for a line UCX prints right after one of those failures
// (an attach, a refused connect), on the same thread, with no other line
// between: expected when that one was.
constexpr int kAfterAttach = -1;
thread_local bool attach_failure_filtered = false;

// The lines a loss explains (UCX 1.13's wording).
constexpr Expected kExpected[] = {
    {"mm_sysv.c", "shmat(", EINVAL},      // the peer's System V segment is already removed
    {"mm_posix.c", "open(", ENOENT},      // ... its file (proc link) already closed
    {"mm_posix.c", "shm_open(", ENOENT},
    {"mm_ep.c", "mm ep failed to connect to remote FIFO", kAfterAttach},  // what UCX adds to the above
    {"sock.c", "connect(", ECONNREFUSED},  // a peer on another host whose worker is gone: nothing listens
                                           // (the engine names the rank it cannot reach, if that matters)
    {"tcp_ep.c", "try to increase \"net.core.somaxconn\"", kAfterAttach},  // UCX's advice once it gave up
                                                                        // reconnecting to that peer
    {"tag_match.c", "unexpected tag-receive descriptor", 0},  // what a failed operation never received
    {"mpool.c", "object ", 0},            // "... was not returned to mpool": requests a failure left
};

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Whether the line is one a lost peer explains; `error` is errno as UCX left it for its %m.
bool expected(const char* file, const char* format, int error) {
  const char* base = base_name(file);
  const bool after_loss = losses.load(std::memory_order_acquire) > 0;
  const bool after_filtered_failure = std::exchange(attach_failure_filtered, false);  // this line only
  for (const Expected& e : kExpected) {
    if (std::strcmp(base, e.file) != 0 || std::strncmp(format, e.message, std::strlen(e.message)) != 0) continue;
    if (e.peer_gone_errno == kAfterAttach) return after_filtered_failure;
    if (e.peer_gone_errno != 0) return attach_failure_filtered = error == e.peer_gone_errno;
    return after_loss;
  }
  return false;
}

thread_local FirstError* recording = nullptr;

// UCX's line as its printer would write it: `format` over `ap` with errno
// as UCX left it (for its %m).
std::string formatted(const char* format, va_list ap, int error) {
  char text[512];
  va_list copy;
  va_copy(copy, ap);
  errno = error;
  std::vsnprintf(text, sizeof(text), format, copy);
  va_end(copy);
  return text;
}

}  // namespace

// Writes a line into the innermost FirstError of this thread that has none.
struct Recorder {
  static void record(const char* file, const char* format, va_list ap, int error) {
    if (!recording || !recording->text_.empty()) return;
    recording->text_ = std::string(base_name(file)) + ": " + formatted(format, ap, error);
  }
};

FirstError::FirstError() : outer_(recording) { recording = this; }
FirstError::~FirstError() { recording = outer_; }

namespace {

ucs_log_func_rc_t filter(const char* file, unsigned line, const char* /*function*/, ucs_log_level_t level,
                         const ucs_log_component_config_t* /*component*/, const char* format, va_list ap) {
  const int error = errno;
  if (level > UCS_LOG_LEVEL_WARN || !expected(file, format, error)) {
    if (level <= UCS_LOG_LEVEL_ERROR) Recorder::record(file, format, ap, error);
    errno = error;  // for UCX's own printer's %m
    return UCS_LOG_FUNC_RC_CONTINUE;
  }
  if (log_level() >= LogLevel::kInfo) {
    RR_LOG(LogLevel::kInfo, "UCX, after a peer left (expected): %s:%u %s", base_name(file), line,
           formatted(format, ap, error).c_str());
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
