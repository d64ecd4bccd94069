#pragma once
// How a blocking call waits for a transport: spin while chunks are moving,
// yield the core briefly, then sleep on the transport's event descriptor, so
// an idle or oversubscribed rank (five ranks on two cores) gives its core to
// the ranks that have work. Also owns the operation's deadline.

#include <sched.h>

#include <chrono>
#include <cstdint>

#include "transport/transport.hpp"

namespace rr::exec {

// What may end a wait early besides the transport: the communicator's abort,
// or a notice from a peer that gave up (lib/comm/control.hpp). Checked on
// every round in which nothing moved.
class Interrupt {
 public:
  // Not ok when the operation must stop; the message says why.
  virtual Status check() = 0;
  // True once after someone asked for a dump (rrCommDump, SIGUSR1): the
  // waiting executor then logs what it waits for.
  virtual bool take_dump_request() { return false; }

 protected:
  ~Interrupt() = default;
};

// How long a failed operation waits for its canceled receives and its
// sends to retire before it returns. A send to a stopped peer never
// retires, and the error must reach the caller within 0.5 s of its cause
// (a timeout within 0.5 s of RR_TIMEOUT_MS: this, the notice to the peers
// and the wait for theirs, comm/communicator.cpp, share that half second).
// A send still held after it strands the communicator (the caller's buffer
// is the transport's until it closes).
constexpr auto kDrainLimit = std::chrono::milliseconds(100);

// How a rank with nothing to do waits inside a call (RR_WAIT_POLICY, read
// once per process):
//   kAuto (default)   kYield while a communicator's ranks on this host
//                     outnumber the CPUs they may use together
//                     (oversubscribed, as Open MPI's mpi_yield_when_idle),
//                     kSleep otherwise;
//   kSleep            spins and yields its core briefly (64 rounds each),
//                     then sleeps on the transport's event descriptor;
//   kYield            spins briefly, then yields for as long as it waits
//                     (never sleeps: the core goes to whichever rank has
//                     work, and a long wait keeps one busy);
//   kSpin             only spins.
// Measured on 2 cores (bench/RESULTS.md, "Small messages and latency",
// "Wait policy with more ranks than cores"): on 2 ranks they tie; on 4,
// yielding is 1.7-2.6 x faster than sleeping for small messages
// (a sleeping rank pays a scheduler wake-up per message) and spinning takes
// milliseconds per call. A policy that yielded first and slept after 50 ms
// measured like sleeping (once a rank has armed UCX's event descriptor, its
// peers signal it on every message), hence the choice by oversubscription.
// So did one that slept after yielding 2 or 20 ms where a same-host Sleeper
// waits (whose writers wake only a rank that says it sleeps): 7.1-7.2 us
// per 8-byte allreduce on 4 ranks of 2 cores against 3.6 yielding
// (2026-12-03). The price of yielding is a busy core through a long wait:
// 3x a torchft step whose replicas reach the allreduce far apart
// (bench/RESULTS.md, "Fault tolerance with torchft"; RR_WAIT_POLICY=sleep
// there).
enum class WaitMode { kAuto, kSleep, kYield, kSpin };

// What a sleeping wait sleeps on when the transport's event descriptor
// would not wake it (the same-host slot rings: a futex on the counter the
// rank waits for).
class Sleeper {
 public:
  virtual void sleep(int timeout_ms) = 0;

 protected:
  ~Sleeper() = default;
};
// "auto", "sleep", "yield" or "spin"; false for anything else.
bool parse_wait_mode(const char* text, WaitMode* out);
const char* wait_mode_name(WaitMode mode);
// RR_WAIT_POLICY, read from the environment here only, once per process
// (every communicator of a process waits the same way): kAuto when unset.
// Not ok, naming the variable and the modes, when it is none of them:
// comm/settings.cpp refuses every init then, and wait_mode() says kAuto.
Status read_wait_mode(WaitMode* out);
WaitMode wait_mode();
// At each communicator's init (comm/communicator.cpp): its `ranks` on this
// host and the CPUs they may use together (`cpus`: the union of their
// affinity masks, 0 where unknown: then this process's own count). The
// process waits as oversubscribed once any communicator was: ranks that a
// launcher bound to one CPU each (mpirun -np 2 binds by default) are not
// sharing one, ranks bound to the same CPU are.
void note_host_ranks(int ranks, int cpus = 0);
// The most ranks any communicator of this process found on this host.
int host_ranks();
// Whether any communicator's ranks here outnumber their CPUs.
bool host_oversubscribed();
// The CPUs this process may run on (its affinity mask).
int usable_cores();
// The CPUs in this process's affinity mask, as 64-bit words (bit c of word
// c / 64: CPU c), for ranks to unite theirs (comm/same_host_path.cpp).
constexpr int kCpuMaskWords = 16;  // 1024 CPUs, glibc's cpu_set_t
void usable_cpu_mask(uint64_t (&mask)[kCpuMaskWords]);
// What a rank waits by: wait_mode(), with kAuto resolved from host_oversubscribed().
WaitMode effective_wait_mode();

class WaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // `mode`: a resolved one (tests pass theirs; the engine, the process's).
  WaitPolicy(transport::Transport* transport, Clock::time_point deadline, Interrupt* interrupt = nullptr,
             Sleeper* sleeper = nullptr, WaitMode mode = effective_wait_mode())
      : transport_(transport), deadline_(deadline), interrupt_(interrupt), sleeper_(sleeper), mode_(mode) {}

  // The call moved (a transfer or chunk completed): go back to spinning,
  // and a peer seen gone must be seen gone again before it fails the call.
  void reset() {
    idle_rounds_ = 0;
    peer_loss_seen_ = false;
  }
  // Only the transport moved (wire-up, keepalives, other traffic): spin
  // again, but a loss already seen stays seen. An algorithm that names its
  // pending peers in turn (a batch) looks at live ones between two looks at
  // a dead one; forgetting the loss there could keep it from ever failing.
  void spin_again() { idle_rounds_ = 0; }

  bool expired() const { return Clock::now() >= deadline_; }

  // The caller spun on what it waits for already (a poll of a flag that
  // lasts as long as the spin rounds would): the next still rounds yield
  // (or, sleeping, go on as after the spin).
  void spun() {
    if (idle_rounds_ < kSpinRounds) idle_rounds_ = kSpinRounds;
  }

  // After a round in which no chunk moved: checks the interrupt, that `left`
  // and `right` are alive, and the deadline, then idles (or spins again when
  // the transport itself moved). Not ok when the operation must stop:
  // kRemoteError with *failed_peer and the transport's message when a
  // neighbour is gone (seen in two rounds running: a transport may show the
  // loss before it has matched what the peer sent just before leaving), the
  // interrupt's status, kTimeout when the deadline passed.
  Status after_still_round(int left, int right, bool transport_moved, int* failed_peer) {
    if (!checks_due()) {
      if (transport_moved) {
        spin_again();
      } else {
        idle();
      }
      return Status::Ok();
    }
    // A peer's notice first: it says why, where a dead neighbour may only be
    // a rank that heard the same and exited.
    RR_RETURN_IF_ERROR(interrupted());
    // A neighbour this rank needs nothing more from (or sends nothing more
    // to) is -1: it may have finished the operation and left, legitimately.
    for (int peer : {left, right}) {
      if (peer < 0) continue;
      Status alive = transport_->peer_status(peer);
      if (!alive.ok()) {
        if (!peer_loss_seen_) {
          peer_loss_seen_ = true;  // one more round of progress first
          return Status::Ok();
        }
        *failed_peer = peer;
        return alive;
      }
    }
    if (expired()) return Timeout("deadline passed");
    if (transport_moved) {
      spin_again();
    } else {
      idle();
    }
    return Status::Ok();
  }

  // Whether this still round should look at the interrupt, the peers and
  // the clock: every 16th while spinning (each look reads the clock, a tenth
  // of a small call's time when done every round), every round after. The
  // first round looks: executors that progress the transport every round
  // reset() whenever it moved, and must not skip the look for that.
  bool checks_due() const { return idle_rounds_ >= kSpinRounds || idle_rounds_ % 16 == 0; }

  // A round in which only the transport moved (wire-up, keepalives, a
  // transfer that has not completed yet): the caller spins on, and looks at
  // the interrupt, the peers and the clock every 16th such round only, so
  // that such traffic neither hides a dead peer or the deadline nor pays the
  // checks on every round of a small call. A dead peer seen once stays seen
  // (after_still_round's second look) across these rounds.
  // Between its checks, such a round spins again, as one that moved does.
  bool busy_round_checks_due() {
    idle_rounds_ = 0;
    return ++busy_rounds_ % 16 == 0;
  }

  Status interrupted() { return interrupt_ ? interrupt_->check() : Status::Ok(); }
  bool dump_requested() { return interrupt_ && interrupt_->take_dump_request(); }

  void idle() {
    if (idle_rounds_ < kSpinRounds + kYieldRounds) ++idle_rounds_;  // saturates
    if (idle_rounds_ < kSpinRounds || mode_ == WaitMode::kSpin) return;
    if (mode_ == WaitMode::kYield) {
      sched_yield();
      return;
    }
    if (idle_rounds_ < kSpinRounds + kYieldRounds) {
      sched_yield();
      return;
    }
    // Sleep until the transport (or the sleeper's peer) signals, bounded so
    // the deadline is checked.
    if (sleeper_) {
      sleeper_->sleep(kSleepMs);
    } else {
      transport_->wait_for_events(kSleepMs);
    }
  }

  // Spinning catches a chunk that lands within a few microseconds; beyond
  // that, the core is worth more to a peer rank than to us.
  static constexpr int kSpinRounds = 64;

 private:
  static constexpr int kYieldRounds = 64;
  static constexpr int kSleepMs = 10;

  transport::Transport* transport_;
  Clock::time_point deadline_;
  Interrupt* interrupt_;
  Sleeper* sleeper_;
  WaitMode mode_;
  int idle_rounds_ = 0;
  unsigned busy_rounds_ = 0;  // busy_round_checks_due's count
  bool peer_loss_seen_ = false;
};

}  // namespace rr::exec
