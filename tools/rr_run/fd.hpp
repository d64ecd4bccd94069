#pragma once
// rr-run's file descriptors: an owner that closes, and close-on-exec pipes.

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace rr::run {

// Owns one file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read_end;
  Fd write_end;
};

// Close-on-exec so that rank k never inherits rank j's pipe ends: an inherited
// write end would hold rank j's stream open after rank j exits.
inline std::optional<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}


inline std::string errno_text(int err) { return std::strerror(err); }

}  // namespace rr::run
