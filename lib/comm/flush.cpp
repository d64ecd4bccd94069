// The end of every operation that sent something (Communicator::settle):
// its bytes must have left this rank's hands before the call returns
// success, since nothing may progress this communicator again until the
// caller's next call on it (transport/transport.hpp, "flushing").

#include <string>

#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "exec/wait_policy.hpp"

namespace rr {

Status Communicator::settle(Status outcome, bool block, bool* settled) {
  if (settled) *settled = true;
  if (!outcome.ok()) return outcome;
  return flush_sends(deadline(), this, block, settled);
}

Status Communicator::flush_sends(exec::Clock::time_point until, exec::Interrupt* interrupt, bool block,
                                 bool* settled) {
  if (settled) *settled = true;
  if (transport_->has_unflushed()) {
    Status begun = transport_->begin_flush();
    if (!begun.ok()) return fail_operation(begun);
  }
  if (transport_->flush_waiting_for() < 0) return Status::Ok();  // nothing was held: the common case
  exec::WaitPolicy wait(transport_.get(), until, interrupt);
  for (;;) {
    const bool moved = transport_->progress();
    Status failed = transport_->flush_failure();
    if (!failed.ok()) return fail_operation(failed);
    const int peer = transport_->flush_waiting_for();
    if (peer < 0) return Status::Ok();
    if (!block) {
      if (settled) *settled = false;
      return Status::Ok();  // the caller tests again later
    }
    // Built only when it is needed: a still round must not allocate.
    auto where = [&] {
      return "rank " + std::to_string(rank_) + " waited for the bytes it sent to rank " + std::to_string(peer) +
             " to leave it (the transport's flush after the call)";
    };
    if (wait.dump_requested()) RR_LOG(LogLevel::kWarn, "dump: %s", where().c_str());
    int lost = -1;
    Status still = wait.after_still_round(peer, -1, moved, &lost);
    if (!still.ok()) return fail_operation(Status(still.code(), where() + ": " + still.message()));
  }
}

}  // namespace rr
