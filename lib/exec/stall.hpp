#pragma once
// The one message for a call that stopped moving, whichever executor runs
// it (the ring on the transport, the slot rings, the chain): the call, what
// happened, this rank, what it waited for and from whom, where, and how far
// it got. "allreduce #7 timed out: rank 0 waited for chunk 3 of
// reduce-scatter step 1 from rank 3 (2 of 8 chunk columns done)".

#include <cstddef>
#include <string>

#include "common/status.hpp"
#include "exec/call.hpp"

namespace rr::exec {

struct Stall {
  enum class Wait {
    kNothing,  // no chunk in flight: only the progress is said
    kChunk,    // for chunk `chunk` from `peer`
    kTake,     // for `peer` to take chunk `chunk`
    kRoom,     // for `peer` to take a chunk before chunk `chunk` (a full slot ring)
  };
  int rank = -1;  // this rank
  Wait wait = Wait::kNothing;
  int peer = -1;
  size_t chunk = 0;
  // The ring's step: its half ("reduce-scatter", "all-gather") and number
  // within it; null for the chain, whose chunks have no step.
  const char* phase = nullptr;
  int phase_step = 0;
  const char* path = nullptr;  // "same-host shared memory", or null: the transport
  // How far the call got, in `unit`s; total 0: not said.
  size_t done = 0;
  size_t total = 0;
  const char* unit = "chunk columns";
};

// `code`: kTimeout "timed out", kOk "in progress" (a dump), else "failed",
// then ": " + cause unless it is empty.
Status stalled(const Call& call, Code code, const Stall& stall, const std::string& cause = {});

}  // namespace rr::exec
