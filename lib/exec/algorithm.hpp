#pragma once
// One call's algorithm as an object, as UCC's collective tasks are: post()
// starts it, progress() moves it on, and neither ever blocks. drive() is the
// one loop that runs an algorithm to its end on the calling thread: it is
// where a blocking call waits (exec/wait_policy.hpp), checks its deadline and
// the communicator's interrupt (an abort, a peer's notice), asks whether the
// peer it waits on is alive, and answers a dump request. An algorithm only
// says which peers it still needs (needs()) and words its stall (stalled()).
//
// A Batch (exec/batch.hpp) is one; the algorithms on batches (coll/:
// recursive doubling, halving-doubling, the binomial trees) run a batch per
// step through it; the pipelined executors on the transport (the UCX ring,
// the chain: exec/column_loop.hpp) are one, and so are the ring on the
// same-host slot rings (exec/shm_ring_executor.cpp) and the one-shot
// schedules on the same-host board (coll/one_shot.hpp).

#include <chrono>
#include <string>

#include "common/status.hpp"
#include "exec/call.hpp"
#include "exec/wait_policy.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

// What one round of progress() did.
struct Round {
  bool done = false;             // the call finished on this rank
  bool moved = false;            // the call moved (a transfer, a chunk): spin on, no checks
  bool transport_moved = false;  // the transport did something (wire-up, keepalives, another
                                 // call's traffic): it must not hide a dead peer or the deadline
  bool spun = false;             // the call spun on what it waits for (the board's first look,
                                 // exec/board_executor.hpp): the wait's own spin is done
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;

  // Starts the call: posts whatever needs nothing received first. `what`
  // names the operation in errors (an algorithm that names its call its own
  // way may ignore it), and stays alive until it ended. Not ok when it
  // cannot start (nothing is then left in flight).
  virtual Status post(const std::string& what) = 0;
  // One round: progresses the transport once and moves the call on with
  // whatever completed. Never blocks. Not ok when the call failed: a
  // transfer failed, or a peer sent what this rank cannot take.
  virtual Status progress(const std::string& what, Round* round) = 0;
  // The peers a still call needs alive now (-1: none): the one it waits to
  // receive from, the one it sends to. A peer it needs nothing more from may
  // have finished the call and left, legitimately.
  virtual void needs(int* from, int* to) const = 0;
  // The error of a call that stalled: `code` is kTimeout, the interrupt's,
  // or the transport's for a dead `failed_peer` (`cause` says what it
  // said); kOk asks for a dump's line about what it waits on.
  virtual Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const = 0;
  // After a failure: cancels pending receives and gives sends kDrainLimit
  // (exec/wait_policy.hpp) to retire.
  virtual void cancel() = 0;
  // What a sleeping wait sleeps on when the transport's event descriptor
  // would not wake it (the slot rings: a futex on the counter the rank
  // waits for); null: the transport's descriptor.
  virtual Sleeper* sleeper() { return nullptr; }
};

// Runs `algorithm` to its end: post(), then progress() until done. A call
// done in its first round (the board's, whose peers' parts are mostly there
// already) reads no clock and sets up no wait: only after a first round
// that left it unfinished does `call`'s deadline start (Call::until) and the
// wait policy decide, after each round in which the call did not move
// (spin, yield, sleep), and, when its checks are due, look at
// `call.interrupt`, the peers the call needs and the deadline. Not ok when
// the algorithm failed, the interrupt fired, a needed peer is gone or the
// deadline passed (then stalled() words it); cancel() has run by then. What
// ended the wait may have come after the call last looked (most often a
// peer's notice about a later call, sent once it had what this rank waits
// for): so one more round runs first, and a call that moves in it goes on;
// the cause, if it still holds, stops it at its next still round.
Status drive(Algorithm& algorithm, const std::string& what, Call& call, transport::Transport* transport);
// The `what` of an algorithm that names its call itself (its stalled()
// words the failure from the call it holds): one empty string, so that no
// label is made for a call that does not fail.
const std::string& named_by_the_algorithm();
// The same until a fixed `deadline`, watching `interrupt` (a batch outside a
// collective call: rrGroupEnd, the init-time exchanges).
Status drive(Algorithm& algorithm, const std::string& what, Clock::time_point deadline, Interrupt* interrupt,
             transport::Transport* transport);

// For an algorithm whose data moves without the transport (the same-host
// slot rings and board): whether a round in which it waits should progress
// the transport all the same, for the notices from peers and the posts
// handed over by other threads that travel on it. As often as the wait
// policy's checks are due: every 16th still round while it spins, every
// round once it yields or sleeps (a notice is then seen within one sleep).
class StillRounds {
 public:
  // The call moved: counting starts again.
  void moved() { rounds_ = 0; }
  // One more still round: true when it should progress the transport.
  bool transport_due() { return ++rounds_ >= WaitPolicy::kSpinRounds || rounds_ % 16 == 0; }

 private:
  unsigned rounds_ = 0;
};

// One round of drive(), for a caller that waits on several algorithms at
// once (rrGroupEnd over several communicators): progress(), then, after a
// still round, what drive() does then (`wait` made with the algorithm's
// sleeper()). *finished once the algorithm is done.
// cancel()s it when it fails.
Status drive_round(Algorithm& algorithm, const std::string& what, WaitPolicy& wait, bool* finished);

}  // namespace rr::exec
