#pragma once
// Status codes through the engine. The C API maps Code to rrResult_t at the
// boundary (lib/api/); no exception crosses it.

#include <string>
#include <utility>

#include "ringreduce/ringreduce.h"

namespace rr {

enum class Code {
  kOk = 0,
  kInvalidArgument,
  kInvalidUsage,
  kSystemError,
  kInternalError,
  kRemoteError,  // a peer failed, disconnected or sent something wrong
  kTimeout,
  kCudaError,  // a CUDA runtime call failed (the GPU path)
  kRevoked,    // the communicator was revoked (rrCommRevoke, here or on a peer)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// The C API's result for a code (lib/api/ returns it; a communicator keeps it
// as its async error).
inline rrResult_t to_result(Code code) {
  switch (code) {
    case Code::kOk: return rrSuccess;
    case Code::kInvalidArgument: return rrInvalidArgument;
    case Code::kInvalidUsage: return rrInvalidUsage;
    case Code::kSystemError: return rrSystemError;
    case Code::kInternalError: return rrInternalError;
    case Code::kRemoteError: return rrRemoteError;
    case Code::kTimeout: return rrTimeout;
    case Code::kRevoked: return rrRevoked;
    case Code::kCudaError: return rrUnhandledCudaError;
  }
  return rrInternalError;
}

inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status InvalidUsage(std::string m) { return Status(Code::kInvalidUsage, std::move(m)); }
inline Status SystemError(std::string m) { return Status(Code::kSystemError, std::move(m)); }
inline Status InternalError(std::string m) { return Status(Code::kInternalError, std::move(m)); }
inline Status RemoteError(std::string m) { return Status(Code::kRemoteError, std::move(m)); }
inline Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
inline Status CudaError(std::string m) { return Status(Code::kCudaError, std::move(m)); }

}  // namespace rr

// Returns early from the enclosing function when `expr` is not ok.
#define RR_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::rr::Status rr_status_ = (expr);     \
    if (!rr_status_.ok()) return rr_status_; \
  } while (0)
