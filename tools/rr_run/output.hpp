#pragma once
// rr-run's output: each rank's stdout and stderr read from its pipes and
// written on as whole lines, tagged with the rank.

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "fd.hpp"

namespace rr::run {

// A rank that never writes a newline must not grow our memory without bound;
// past this size its pending bytes go out as a line of their own.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
inline constexpr std::size_t kReadBytes = std::size_t{64} << 10;

// One of rr-run's own output streams. Each write is a batch of whole lines, so
// lines of different ranks never interleave mid-line.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}

  void write(const std::string& bytes) {
    std::size_t done = 0;
    while (!broken_ && done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n >= 0) {
        done += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN) {
        // Our stdout may be a non-blocking description shared with the caller.
        pollfd writable{fd_, POLLOUT, 0};
        ::poll(&writable, 1, -1);
      } else if (errno != EINTR) {
        broken_ = true;  // EPIPE (`rr-run ... | head`) or worse: nobody reads it any more
      }
    }
  }

  bool broken() const { return broken_; }

 private:
  int fd_;
  bool broken_ = false;
};

// One rank's stdout or stderr: bytes in from its pipe, whole tagged lines out.
class LineStream {
 public:
  LineStream() = default;
  LineStream(Fd pipe, std::string prefix, Sink* sink)
      : pipe_(std::move(pipe)), prefix_(std::move(prefix)), sink_(sink) {}

  bool open() const { return pipe_.valid(); }
  int fd() const { return pipe_.get(); }

  // One read per readiness report, so a chatty rank cannot starve the others;
  // poll is level-triggered and comes back for the rest.
  void read_some() {
    char buffer[kReadBytes];
    ssize_t n;
    do {
      n = ::read(pipe_.get(), buffer, sizeof buffer);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // end of file, or an error that ends the stream just the same
      emit(/*at_eof=*/true);
      pipe_.reset();
      return;
    }
    pending_.append(buffer, static_cast<std::size_t>(n));
    emit(/*at_eof=*/false);
    // Pass a broken pipe on: once we stop reading, the rank's own next write
    // fails with SIGPIPE, just as if it wrote to `head` directly. Dropping the
    // output instead would let `rr-run -n 2 yes | head` run forever.
    if (sink_->broken()) pipe_.reset();
  }

 private:
  void emit(bool at_eof) {
    std::string out;
    std::size_t start = 0;
    for (std::size_t newline; (newline = pending_.find('\n', start)) != std::string::npos;
         start = newline + 1) {
      out += prefix_;
      out.append(pending_, start, newline + 1 - start);
    }
    const std::size_t rest = pending_.size() - start;
    // A trailing partial line still gets its own line, so the next rank's tag
    // starts at the beginning of one.
    if (rest > 0 && (at_eof || rest >= kMaxLineBytes)) {
      out += prefix_;
      out.append(pending_, start, rest);
      out += '\n';
      start = pending_.size();
    }
    pending_.erase(0, start);
    if (!out.empty()) sink_->write(out);
  }

  Fd pipe_;
  std::string prefix_;
  Sink* sink_ = nullptr;
  std::string pending_;
};
}  // namespace rr::run
