// The group's timeout (dist.set_timeout) and each operation's own
// (opts.timeout), handed to the engine with each call: a collective's in its
// per-call config (rrCollConfig_t), a send's or receive's by setting the
// communicator's before it (rrCommSetTimeout), which such a call takes when
// it is made.

#include <algorithm>
#include <climits>
#include <string>

#include "errors.hpp"
#include "process_group.hpp"

namespace ringreduce_torch {

void ProcessGroupRingreduce::setTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 1) {
    throw invalid_argument("set_timeout", "timeout=" + std::to_string(timeout.count()) + " ms must be at least 1 ms");
  }
  std::unique_lock<std::mutex> lock = lock_issue();
  timeout_ = timeout;
  // Now, for sends and receives too (an ended group has no engine to tell).
  if (state_ == State::kOpen) use_timeout_locked("set_timeout", c10d::kUnsetTimeout);
}

std::chrono::milliseconds ProcessGroupRingreduce::group_timeout() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  return timeout_;
}

namespace {

// An operation's timeout (kUnsetTimeout: `group`'s) in the engine's
// milliseconds; throws naming the operation below 1 ms.
int engine_ms(const char* op_name, std::chrono::milliseconds timeout, std::chrono::milliseconds group) {
  if (timeout == c10d::kUnsetTimeout) timeout = group;
  if (timeout.count() < 1) {
    throw invalid_argument(op_name, "timeout=" + std::to_string(timeout.count()) + " ms must be at least 1 ms");
  }
  return static_cast<int>(std::min<int64_t>(timeout.count(), INT_MAX));
}

}  // namespace

rrCollConfig_t ProcessGroupRingreduce::call_config_locked(const char* op_name,
                                                          std::chrono::milliseconds timeout) const {
  rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
  config.timeout_ms = engine_ms(op_name, timeout, timeout_);
  return config;
}

void ProcessGroupRingreduce::use_timeout_locked(const char* op_name, std::chrono::milliseconds timeout) {
  const int ms = engine_ms(op_name, timeout, timeout_);
  if (std::chrono::milliseconds(ms) == engine_timeout_) return;
  check_result(rrCommSetTimeout(comm_, ms), op_name);
  engine_timeout_ = std::chrono::milliseconds(ms);
}

}  // namespace ringreduce_torch
