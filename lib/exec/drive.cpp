#include "exec/algorithm.hpp"

#include "common/log.hpp"
#include "exec/batch.hpp"
#include "exec/wait_policy.hpp"

namespace rr::exec {

namespace {

// "allreduce #7: rank 0 waited to receive 32 bytes from rank 1". Built only
// when it is needed: a still round must not allocate.
std::string where(const std::string& what, const Transfer& t, int rank) {
  return what + ": rank " + std::to_string(rank) + " waited to " +
         (t.is_send ? "send " : t.up_to ? "receive up to " : "receive ") + std::to_string(t.bytes) + " bytes " +
         (t.is_send ? "to" : "from") + " rank " + std::to_string(t.peer);
}

// The checks of a still round: a dump request, the interrupt, the waited-on
// peer, the deadline.
Status still_round_checks(Algorithm& algorithm, const std::string& what, WaitPolicy& wait,
                          transport::Transport* transport) {
  const Transfer* waiting = algorithm.waiting();
  auto here = [&] { return waiting ? where(what, *waiting, transport->rank()) : what; };
  if (wait.dump_requested()) {
    RR_LOG(LogLevel::kWarn, "dump: %s in progress (%s)", here().c_str(), algorithm.progress_note().c_str());
  }
  Status interrupted = wait.interrupted();
  if (!interrupted.ok()) return Status(interrupted.code(), here() + ": " + interrupted.message());
  if (waiting) {
    Status alive = transport->peer_status(waiting->peer);
    if (!alive.ok()) return RemoteError(here() + ": " + alive.message());
  }
  if (wait.expired()) return Timeout(here() + " (" + algorithm.progress_note() + ")");
  return Status::Ok();
}

}  // namespace

Status drive_round(Algorithm& algorithm, const std::string& what, WaitPolicy& wait, transport::Transport* transport,
                   bool* finished, bool* moved) {
  *finished = false;
  *moved = false;
  Status status = algorithm.progress(what, finished, moved);
  if (status.ok() && !*finished && !*moved && wait.checks_due()) {
    status = still_round_checks(algorithm, what, wait, transport);
  }
  if (!status.ok()) algorithm.cancel();
  return status;
}

Status drive(Algorithm& algorithm, const std::string& what, std::chrono::steady_clock::time_point deadline,
             Interrupt* interrupt, transport::Transport* transport) {
  RR_RETURN_IF_ERROR(algorithm.post(what));
  WaitPolicy wait(transport, deadline, interrupt);
  for (;;) {
    bool finished = false;
    bool moved = false;
    RR_RETURN_IF_ERROR(drive_round(algorithm, what, wait, transport, &finished, &moved));
    if (finished) return Status::Ok();
    if (moved) {
      wait.reset();
    } else {
      wait.idle();
    }
  }
}

}  // namespace rr::exec
