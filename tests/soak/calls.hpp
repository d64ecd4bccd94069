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

 // One call between its issue and its check (issued.hpp).
  struct Issued;

 private:
  void prepare(Issued& c);
  void issue(Issued& c);
  void wait(Issued& c, size_t request);
  void check(Issued& c);
  void split_reversed(const Call& call);

  uint64_t seed_;
  int world_rank_;
  int world_size_;
  std::vector<Comm>* comms_;
  std::vector<Slot>* slots_;
  Stats stats_;
  uint64_t corrupt_call_ = UINT64_MAX;
  bool corrupted_ = false;
};

// Fills the member map of a new communicator (one allgather of world ranks on it).
void learn_members(Comm* comm, int world_rank);
[[noreturn]] void die(const std::string& message);

}  // namespace soak
