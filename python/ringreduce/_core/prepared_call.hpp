#pragma once
// A call's C arguments, converted from Python once and then run either
// blocking or as a request: each method's blocking and non-blocking (i-)
// forms share the conversion.

#include <cstddef>
#include <functional>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"
#include "comm.hpp"
#include "request.hpp"

namespace ringreduce_core {

// `run` makes the C call: blocking when its request is nullptr, else the
// ...Async / request form. `buffers` and `arrays` are what it reads and writes.
struct Prepared {
  std::vector<Buffer> buffers;
  std::vector<size_t> arrays;
  bool has_status = false;
  std::function<rrResult_t(rrComm_t, rrRequest_t*)> run;
};

// Runs `p` and returns once it finished; raises its error. `what` names the
// method in errors.
void run_blocking(CommState& state, const char* what, Prepared& p);

// Issues `p` as a request; the Request (and, until it finished, the
// communicator) holds p's buffers and arrays.
Request run_async(const CommPtr& state, const char* what, Prepared& p);

}  // namespace ringreduce_core
