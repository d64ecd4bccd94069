#include "exec/algorithm.hpp"

#include "common/log.hpp"
#include "exec/wait_policy.hpp"

namespace rr::exec {

namespace {

// What drive_round() does after progress() said `round`, unless that was a
// still round (kept out of line: the still round is the loop most often run).
[[gnu::noinline]] Status after_round(Algorithm& algorithm, const std::string& what, WaitPolicy& wait,
                                     const Round& round, Status status, bool* finished) {
  *finished = status.ok() && round.done;
  if (status.ok() && !round.done) {
    if (round.moved) {
      wait.reset();
      if (round.spun) wait.spun();
      return Status::Ok();
    }
    if (round.spun) wait.spun();
    if (round.transport_moved && !wait.busy_round_checks_due()) return Status::Ok();
    if (!wait.checks_due()) {  // a still round (drive_round takes most of them)
      wait.idle();
      return Status::Ok();
    }
    if (wait.dump_requested()) {
      RR_LOG(LogLevel::kWarn, "dump: %s", algorithm.stalled(what, Code::kOk, -1, {}).message().c_str());
    }
    int from = -1;
    int to = -1;
    algorithm.needs(&from, &to);
    int failed_peer = -1;
    // Checks the interrupt, the peers and the deadline when due, then idles.
    Status cause = wait.after_still_round(from, to, round.transport_moved, &failed_peer);
    if (!cause.ok()) {
      Round again;
      status = algorithm.progress(what, &again);
      if (status.ok() && (again.moved || again.done)) {
        *finished = again.done;
        wait.reset();
        return Status::Ok();
      }
    }
    if (status.ok() && !cause.ok()) {
      status = algorithm.stalled(what, cause.code(), cause.code() == Code::kTimeout ? -1 : failed_peer,
                                 cause.code() == Code::kTimeout ? std::string() : cause.message());
    }
  }
  if (!status.ok()) algorithm.cancel();
  return status;
}

}  // namespace

const std::string& named_by_the_algorithm() {
  static const std::string none;
  return none;
}

Status drive_round(Algorithm& algorithm, const std::string& what, WaitPolicy& wait, bool* finished) {
  Round round;
  Status status = algorithm.progress(what, &round);
  // The common still round, kept lean (a rank that spins before it yields
  // spins for a number of rounds: their cost is the time it holds the core):
  // no look at anything.
  if (status.ok() && !round.done && !round.moved && !round.transport_moved && !round.spun && !wait.checks_due()) {
    *finished = false;
    wait.idle();
    return status;
  }
  return after_round(algorithm, what, wait, round, std::move(status), finished);
}

Status drive(Algorithm& algorithm, const std::string& what, Call& call, transport::Transport* transport) {
  RR_RETURN_IF_ERROR(algorithm.post(what));
  Round round;
  Status status = algorithm.progress(what, &round);
  if (status.ok() && round.done) return status;  // no wait, no clock
  WaitPolicy wait(transport, call.until(), call.interrupt, algorithm.sleeper());
  bool finished = false;
  RR_RETURN_IF_ERROR(after_round(algorithm, what, wait, round, std::move(status), &finished));
  while (!finished) RR_RETURN_IF_ERROR(drive_round(algorithm, what, wait, &finished));
  return Status::Ok();
}

Status drive(Algorithm& algorithm, const std::string& what, Clock::time_point deadline, Interrupt* interrupt,
             transport::Transport* transport) {
  Call call;
  call.deadline = deadline;
  call.interrupt = interrupt;
  return drive(algorithm, what, call, transport);
}

}  // namespace rr::exec
