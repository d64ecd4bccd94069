#pragma once
// TCP plumbing for the rendezvous store: an owned file descriptor, name
// resolution, listen / connect-with-retry, and send / receive that never block
// past a deadline.
//
// Every socket made here is non-blocking and close-on-exec. Blocking is done
// only in poll(), with a timeout computed from the caller's deadline, so no
// call outlives its deadline by more than one poll wake-up.

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace rr::bootstrap {

using SocketClock = std::chrono::steady_clock;

// Owns one file descriptor (socket, eventfd, file) and closes it exactly once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A connected or listening TCP socket plus the address it talks to, kept so
// that every error message can name the peer ("10.0.0.2:29500").
class Socket {
 public:
  Socket() = default;
  Socket(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  Socket(Socket&&) noexcept = default;
  Socket& operator=(Socket&&) noexcept = default;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  // "host:port" of the peer (connected) or of the bound address (listening).
  const std::string& peer() const { return peer_; }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string peer_;
};

// One resolved socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  const sockaddr* addr() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

// "1.2.3.4:80" or "[::1]:80".
std::string format_address(const SocketAddress& address);

// Resolves `host` (name, IPv4 or IPv6 literal) for TCP. An empty host with
// `passive` means every local address (bind to any). Addresses come in
// getaddrinfo's preference order.
[[nodiscard]] Status resolve_host(const std::string& host, uint16_t port, bool passive,
                                  std::vector<SocketAddress>* out);

// Binds and listens on `bind_host`:`port` (port 0 = any free port; empty host =
// all interfaces). Writes the socket and the port actually bound on success.
[[nodiscard]] Status listen_tcp(const std::string& bind_host, uint16_t port, Socket* out,
                                uint16_t* bound_port);

// Accepts one pending connection from a listening socket. Sets `*accepted` to
// false (and returns Ok) when none is pending.
[[nodiscard]] Status accept_tcp(const Socket& listener, Socket* out, bool* accepted);

// Connects to `host`:`port`, retrying every ~50-100 ms while the peer is not
// (yet) there: refused, unreachable, timed out, reset. Gives up at `deadline`
// with kTimeout naming host:port and the last error seen.
[[nodiscard]] Status connect_tcp(const std::string& host, uint16_t port,
                                 SocketClock::time_point deadline, Socket* out);

// How long to wait before the next connect attempt: 50-100 ms, at random so
// that many ranks started together do not knock on a server in lockstep.
std::chrono::milliseconds connect_retry_pause();

// Whether every address `host` resolves to is a loopback one (127.0.0.0/8,
// ::1, or 127.x mapped into IPv6), i.e. no other host can reach it. An empty
// host with `passive` means every local address: not loopback. A host that
// does not resolve is not loopback either.
bool is_loopback_host(const std::string& host, bool passive);

// Sends all `size` bytes or fails: kTimeout at the deadline, kRemoteError when
// the peer is gone (never SIGPIPE), kSystemError otherwise.
[[nodiscard]] Status send_all(const Socket& socket, const void* data, size_t size,
                              SocketClock::time_point deadline);

// Receives exactly `size` bytes or fails like send_all; an orderly close by the
// peer before `size` bytes is kRemoteError.
[[nodiscard]] Status recv_all(const Socket& socket, void* data, size_t size,
                              SocketClock::time_point deadline);

// Milliseconds for poll() until `deadline`: 0 when it has passed, rounded up
// so that poll does not wake just before it, capped to fit an int.
int poll_timeout_ms(SocketClock::time_point deadline);

// strerror for `error`, thread-safe.
std::string errno_text(int error);

}  // namespace rr::bootstrap
