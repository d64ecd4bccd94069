// The group's timeout (dist.set_timeout) and each operation's own
// (opts.timeout), handed to the engine as each call is issued: the engine
// call takes the timeout in force when it is made (rrCommSetTimeout).

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

void ProcessGroupRingreduce::use_timeout_locked(const char* op_name, std::chrono::milliseconds timeout) {
  if (timeout == c10d::kUnsetTimeout) timeout = timeout_;
  if (timeout.count() < 1) {
    throw invalid_argument(op_name, "timeout=" + std::to_string(timeout.count()) + " ms must be at least 1 ms");
  }
  if (timeout == engine_timeout_) return;
  const int ms = static_cast<int>(std::min<int64_t>(timeout.count(), INT_MAX));
  check_result(rrCommSetTimeout(comm_, ms), op_name);
  engine_timeout_ = timeout;
}

}  // namespace ringreduce_torch
