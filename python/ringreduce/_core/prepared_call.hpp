#pragma once
// A call's C arguments, converted from Python once and then run either
// blocking or as a request: each method's blocking and non-blocking (i-)
// forms share the conversion.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "buffers.hpp"
#include "comm.hpp"
#include "request.hpp"

namespace ringreduce_core {

// `run` makes the C call: blocking when its request is nullptr, else the
// ...Async / request form, under the call's own config when it has one (a
// collective's Config forms; NULL: the communicator's settings; point-to-
// point takes none). `buffers` and `arrays` are what it reads and writes.
struct Prepared {
  std::vector<Buffer> buffers;
  std::vector<size_t> arrays;
  bool has_status = false;
  std::function<rrResult_t(rrComm_t, rrRequest_t*, const rrCollConfig_t*)> run;
};

// Runs `p` and returns once it finished; raises its error. `what` names the
// method in errors. `timeout` (seconds) and `algorithm` (allreduce's): the
// call's own (its rrCollConfig_t), or none: the communicator's.
void run_blocking(CommState& state, const char* what, Prepared& p, std::optional<double> timeout = std::nullopt,
                  const std::optional<std::string>& algorithm = std::nullopt);

// Issues `p` as a request; the Request (and, until it finished, the
// communicator) holds p's buffers and arrays. `timeout` and `algorithm` as
// run_blocking's.
Request run_async(const CommPtr& state, const char* what, Prepared& p, std::optional<double> timeout = std::nullopt,
                  const std::optional<std::string>& algorithm = std::nullopt);

}  // namespace ringreduce_core
