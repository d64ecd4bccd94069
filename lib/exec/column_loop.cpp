#include "exec/column_loop.hpp"

#include "common/log.hpp"
#include "exec/wait_policy.hpp"

namespace rr::exec {

Status ColumnLoop::run_columns(transport::Transport* transport, Call& call, size_t depth, size_t total,
                               int left, int right) {
  done_ = 0;
  size_t next = 0;
  Status status;
  for (size_t slot = 0; slot < depth && next < total && status.ok(); ++slot) status = start(slot, next++);

  WaitPolicy wait(transport, call.until(), call.interrupt);
  while (status.ok() && done_ < total) {
    const bool transport_moved = transport->progress();
    bool moved = false;
    for (size_t slot = 0; slot < depth && status.ok(); ++slot) {
      if (!active(slot)) continue;
      bool chunk_moved = false;
      bool finished = false;
      status = advance(slot, &chunk_moved, &finished);
      moved |= chunk_moved || finished;
      if (finished) {
        ++done_;
        if (next < total && status.ok()) status = start(slot, next++);
      }
    }
    if (!status.ok()) break;
    if (moved) {
      wait.reset();
      continue;
    }
    // No chunk moved (UCX may still be busy with wire-up, keepalives or
    // partial transfers, which must not hide a dead peer or the deadline).
    if (wait.dump_requested()) RR_LOG(LogLevel::kWarn, "dump: %s", describe_stall(Code::kOk, -1, {}).message().c_str());
    bool need_left = false;
    bool need_right = false;
    needs(next < total, &need_left, &need_right);
    int failed_peer = -1;
    Status cause =
        wait.after_still_round(need_left ? left : -1, need_right ? right : -1, transport_moved, &failed_peer);
    if (cause.code() == Code::kTimeout) {
      status = describe_stall(Code::kTimeout, -1, {});
    } else if (!cause.ok()) {
      status = describe_stall(cause.code(), failed_peer, cause.message());
    }
  }
  if (!status.ok()) drain();
  return status;
}

}  // namespace rr::exec
