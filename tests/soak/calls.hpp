#pragma once
// Runs the soak's batches through the public C API and checks every result
// against the reference computed here, in double precision, from the inputs
// every rank can make (values.hpp). Any engine error, and any wrong element,
// ends the rank at once with a message naming the call; rr-run then takes
// the job down.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plan.hpp"
#include "ringreduce/ringreduce.h"

namespace soak {

struct Comm {
  rrComm_t handle = nullptr;
  int rank = 0;
  int size = 1;
  std::vector<int> members;  // [comm rank] -> world rank
};

// One call's buffers, allocated and touched once, for the whole run.
struct Slot {
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t bytes = 0;
};

struct KindCount {
  uint64_t blocking = 0;
  uint64_t async = 0;  // Async collectives and i-form point-to-point
  uint64_t bytes = 0;  // this rank's largest buffer of each call, summed
};

struct Stats {
  std::array<KindCount, kNumKinds> kinds{};
  uint64_t calls() const;
};

class Runner {
 public:
  Runner(uint64_t seed, int world_rank, int world_size, std::vector<Comm>* comms, std::vector<Slot>* slots);
  // Issues the batch's calls, waits for them, checks every result.
  void run(const Batch& batch);
  const Stats& stats() const { return stats_; }
  // For the break-on-purpose check (--corrupt-reference CALL): the reference
  // of that call's first checked element is made wrong, so the check must fail.
  void corrupt_reference_of(uint64_t call) { corrupt_call_ = call; }
  // --random-shapes: the churned communicator is remade with a drawn shape (shapes.hpp).
  void use_random_shapes() { random_shapes_ = true; }
  // --threads: a batch on several communicators is driven from one thread
  // per communicator (run.cpp).
  void use_threads() { threads_ = true; }

 // One call between its issue and its check (issued.hpp).
  struct Issued;

 private:
  void prepare(Issued& c);
  void issue(Issued& c);
  void wait(Issued& c, size_t request);
  void check(Issued& c);
  void split_reversed(const Call& call);
  // Issues the batch's calls on communicator `comm` (every one: kAllComms)
  // in batch order, then waits for them in the batch's wait order.
  static constexpr int kAllComms = -1;
  void drive(const Batch& batch, std::vector<Issued>& issued, int comm);

  uint64_t seed_;
  int world_rank_;
  int world_size_;
  std::vector<Comm>* comms_;
  std::vector<Slot>* slots_;
  Stats stats_;
  uint64_t corrupt_call_ = UINT64_MAX;
  bool corrupted_ = false;
  bool random_shapes_ = false;
  bool threads_ = false;
};

// Fills the member map of a new communicator (one allgather of world ranks on it).
void learn_members(Comm* comm, int world_rank);

// What die() does after printing its message, before the rank exits:
// soak_rank's one-line report (seed, call, replay command) and its dump of
// every communicator. `call` is the drawn call the failing thread was in,
// or null (setup, a control call, a sample).
using FailureHook = void (*)(const std::string& message, const Call* call);
void set_failure_hook(FailureHook hook);
// Prints the message, runs the hook and ends the rank with status 1. From
// several threads at once (with --threads every communicator times out at
// about the same time) the first one reports, the others wait for the exit.
[[noreturn]] void die(const std::string& message);

}  // namespace soak
