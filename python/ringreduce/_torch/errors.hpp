#pragma once
// The backend's one exception type: the engine's result code and text. The
// module registers a translator that raises it in Python as the matching
// ringreduce.Error subclass (all of them RuntimeErrors, as torch.distributed's
// users expect of a backend's failures).

#include <stdexcept>
#include <string>

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

class Error : public std::runtime_error {
 public:
  Error(rrResult_t result, const std::string& message) : std::runtime_error(message), result_(result) {}
  rrResult_t result() const { return result_; }

 private:
  rrResult_t result_;
};

// rrInvalidArgument "ringreduce <op_name>: <what>": every argument check's
// error names the operation first, as ProcessGroupGloo's do.
inline Error invalid_argument(const char* op_name, const std::string& what) {
  return Error(rrInvalidArgument, std::string("ringreduce ") + op_name + ": " + what);
}

// "ringreduce <op_name>: <the engine's text>" with `result`, right after a
// call failed on this thread: the engine keeps each thread's last error, so
// this is the failed call's text even when the communicator is gone (aborted).
// A timeout says so in the words torch's users and its test suite look for
// (" Timed out ").
inline Error engine_error(rrResult_t result, const char* op_name) {
  if (result == rrTimeout) {
    return Error(result, std::string("ringreduce ") + op_name + ": Timed out (" + rrGetLastError(nullptr) + ")");
  }
  return Error(result, std::string("ringreduce ") + op_name + ": " + rrGetLastError(nullptr));
}

// Throws engine_error unless `result` is rrSuccess.
inline void check_result(rrResult_t result, const char* op_name) {
  if (result != rrSuccess) throw engine_error(result, op_name);
}

}  // namespace ringreduce_torch
