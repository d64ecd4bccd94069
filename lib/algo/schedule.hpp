#pragma once
// Every schedule the engine runs, in one table (schedule.cpp): the word an
// error names a call's schedule by ("allreduce #7 (ring)"), and the name
// rrCommGetAlgorithm, rr-bench's column, rr-sim and the log report
// ("ring (shared memory)"). The communicator's choice (comm/algorithm_choice.cpp)
// and each call (exec::Call::schedule) hold a Schedule, never its text.

#include <cstdint>

#include "algo/select.hpp"

namespace rr::algo {

enum class Schedule : uint8_t {
  kNone,               // not chosen yet
  kLocalCopy,          // one rank
  kRing,               // over the transport
  kSameHostRing,       // over same-host slot rings
  kRecursiveDoubling,
  kHalvingDoubling,
  kOneShot,            // on the same-host board
  kBinomialTree,
  kChain,
  kDirect,             // every transfer posted at once (gather, scatter, all-to-all)
  kArgumentCheck,      // a call's argument check on the board, before the schedule that moves its data
  kLast = kArgumentCheck,
};

// "ring (shared memory)": what rrCommGetAlgorithm says.
const char* schedule_name(Schedule s);
// "ring": how an error names the schedule of the call that failed; "" for kNone.
const char* schedule_word(Schedule s);
// The schedule an allreduce the selector gave `chosen` runs as (kAuto is
// not a schedule: the ring), on the same-host slot rings when `same_host`.
Schedule allreduce_schedule(AllreduceAlgo chosen, bool same_host);

}  // namespace rr::algo
