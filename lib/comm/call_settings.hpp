#pragma once
// What one call sets for itself (the C API's rrCollConfig_t, checked in
// api/routing.cpp) over its communicator's settings: the communicator runs
// a call under them (Communicator::CallScope), a queued call's and a
// stream-ordered call's host half too.

#include "algo/select.hpp"

namespace rr {

struct CallSettings {
  int timeout_ms = 0;  // the call's deadline; 0: the communicator's (rrCommSetTimeout)
  // The allreduce schedule the call forces (kAuto: the model decides), when
  // forces_algorithm; else the communicator's (RR_ALGO).
  algo::AllreduceAlgo allreduce_algo = algo::AllreduceAlgo::kAuto;
  bool forces_algorithm = false;
};

}  // namespace rr
