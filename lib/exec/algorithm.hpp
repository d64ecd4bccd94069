#pragma once
// One call's algorithm as an object, as UCC's collective tasks are: post()
// starts it, progress() moves it on, and neither ever blocks. drive() is the
// one loop that runs an algorithm to its end on the calling thread: it is
// where a blocking call waits (exec/wait_policy.hpp), checks its deadline and
// the communicator's interrupt (an abort, a peer's notice), asks whether the
// peer it waits on is alive, and answers a dump request. An algorithm only
// says what it waits on (waiting()).
//
// A Batch (exec/batch.hpp) is one; the algorithms on batches (coll/:
// recursive doubling, halving-doubling, the binomial trees) run a batch per
// step through it. The ring, chain and board executors still wait in their
// own loops (issue 34 moves them here next).

#include <chrono>
#include <string>

#include "common/status.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class Interrupt;
class WaitPolicy;
struct Transfer;

class Algorithm {
 public:
  virtual ~Algorithm() = default;

  // Starts the call: posts whatever needs nothing received first. `what`
  // names the operation in errors, and stays alive until it ended. Not ok
  // when it cannot start (nothing is then left in flight).
  virtual Status post(const std::string& what) = 0;
  // One round: progresses the transport once and moves the call on with
  // whatever completed. *done once the call finished on this rank; *moved
  // when anything happened (the wait then spins again). Never blocks. Not
  // ok when the call failed: a transfer failed, or a peer sent what this
  // rank cannot take.
  virtual Status progress(const std::string& what, bool* done, bool* moved) = 0;
  // The transfer the call waits on now (the first not done), for the stall
  // checks and messages; null when it waits on nothing of the transport's.
  virtual const Transfer* waiting() const = 0;
  // Its progress in words, for a timeout or a dump: "3 of 4 transfers done".
  virtual std::string progress_note() const = 0;
  // After a failure: cancels pending receives and gives sends kDrainLimit
  // (exec/wait_policy.hpp) to retire.
  virtual void cancel() = 0;
};

// Runs `algorithm` to its end: post(), then progress() until done, waiting
// as the process's wait policy says between still rounds. Not ok when the
// algorithm failed (after cancel()), `interrupt` fired, the peer it waits on
// is gone, or `deadline` passed: the message then says what it waited for.
Status drive(Algorithm& algorithm, const std::string& what, std::chrono::steady_clock::time_point deadline,
             Interrupt* interrupt, transport::Transport* transport);

// One round of drive(), for a caller that waits on several algorithms at
// once (rrGroupEnd over several communicators) and idles between rounds
// itself: progress(), then, after a still round whose checks are due, the
// checks drive() makes. *finished once the algorithm is done; *moved when
// anything happened. cancel()s it when it fails.
Status drive_round(Algorithm& algorithm, const std::string& what, WaitPolicy& wait, transport::Transport* transport,
                   bool* finished, bool* moved);

}  // namespace rr::exec
