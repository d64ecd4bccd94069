#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "common/resources.hpp"

namespace rr::bootstrap {
namespace {

using std::chrono::milliseconds;

// A connect attempt whose SYN goes unanswered is abandoned after this long and
// retried, so that one black-holed address cannot use up the whole deadline.
constexpr milliseconds kConnectAttemptLimit{5000};
// Pause between connect rounds: the base plus a random share of the jitter, so
// that many ranks started together do not knock on the server in lockstep.
constexpr milliseconds kConnectRetryBase{50};
constexpr milliseconds kConnectRetryJitter{50};

// strerror_r is the GNU variant (returns char*) under glibc with _GNU_SOURCE and
// the XSI one (returns int) elsewhere; these overloads accept either.
[[maybe_unused]] const char* strerror_result(char* result, const char*) { return result; }
[[maybe_unused]] const char* strerror_result(int result, const char* buffer) {
  return result == 0 ? buffer : "unknown error";
}

// "host:port", bracketing IPv6 literals so the port stays unambiguous.
std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

void set_nodelay(int fd) {
  // The store exchanges small request/reply messages: Nagle would add a delay
  // to every one. Failure only costs latency, so it is not an error.
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// getaddrinfo wrapper: returns the EAI_* code (0 on success) and the text for it.
int resolve(const std::string& host, uint16_t port, bool passive, std::vector<SocketAddress>* out,
            std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  const char* node = (host.empty() && passive) ? nullptr : host.c_str();
  addrinfo* list = nullptr;
  int rc = getaddrinfo(node, service.c_str(), &hints, &list);
  if (rc != 0) {
    *error = (rc == EAI_SYSTEM) ? errno_text(errno) : gai_strerror(rc);
    return rc;
  }
  std::vector<SocketAddress> addresses;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress address;
    std::memcpy(&address.storage, ai->ai_addr, ai->ai_addrlen);
    address.length = ai->ai_addrlen;
    addresses.push_back(address);
  }
  freeaddrinfo(list);
  if (addresses.empty()) {
    *error = "no TCP address";
    return EAI_NONAME;
  }
  *out = std::move(addresses);
  return 0;
}

// Whether a failed connect() is worth retrying: the server may simply not be
// listening yet, or the network not yet up.
bool connect_error_is_transient(int error) {
  switch (error) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETUNREACH:
    case ENETDOWN:
    case EADDRNOTAVAIL:  // ephemeral ports exhausted for the moment
    case EAGAIN:
    case EINTR:
      return true;
    default:
      return false;
  }
}

bool same_address(const sockaddr_storage& a, socklen_t a_len, const sockaddr_storage& b,
                  socklen_t b_len) {
  return a_len == b_len && std::memcmp(&a, &b, a_len) == 0;
}

// One connect attempt to one address. Returns 0 and the socket on success, or
// the errno that made it fail.
int connect_once(const SocketAddress& address, SocketClock::time_point deadline, UniqueFd* out) {
  UniqueFd fd(socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!fd.valid()) return errno;
  if (connect(fd.get(), address.addr(), address.length) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    // The handshake is under way: wait for it, but not past the deadline nor
    // longer than one attempt may take.
    const auto attempt_deadline =
        std::min(deadline, SocketClock::now() + kConnectAttemptLimit);
    pollfd p{fd.get(), POLLOUT, 0};
    for (;;) {
      int ready = poll(&p, 1, poll_timeout_ms(attempt_deadline));
      if (ready > 0) break;
      if (ready < 0 && errno != EINTR) return errno;
      if (ready == 0 && SocketClock::now() >= attempt_deadline) return ETIMEDOUT;
    }
    int error = 0;
    socklen_t length = sizeof(error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
    if (error != 0) return error;
  }
  // Loopback connects to a free port in the ephemeral range can succeed as a
  // TCP "simultaneous open" with ourselves (source port == destination port).
  // That is nobody listening, so treat it as refused.
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
      getpeername(fd.get(), reinterpret_cast<sockaddr*>(&remote), &remote_len) == 0 &&
      same_address(local, local_len, remote, remote_len)) {
    return ECONNREFUSED;
  }
  set_nodelay(fd.get());
  *out = std::move(fd);
  return 0;
}

// Waits until `socket` is ready for `events` or `deadline` passes.
Status wait_ready(const Socket& socket, short events, SocketClock::time_point deadline,
                  const char* verb, size_t done, size_t total) {
  pollfd p{socket.fd(), events, 0};
  for (;;) {
    int ready = poll(&p, 1, poll_timeout_ms(deadline));
    if (ready > 0) return Status::Ok();  // readable, writable, or an error the next call reports
    if (ready < 0 && errno != EINTR) {
      return SystemError(std::string("poll while ") + verb + " " + socket.peer() + ": " +
                         errno_text(errno));
    }
    if (ready == 0 && SocketClock::now() >= deadline) {
      return Timeout(std::string(verb) + " " + socket.peer() + " timed out after " +
                     std::to_string(done) + " of " + std::to_string(total) + " bytes");
    }
  }
}

Status io_error(const Socket& socket, const char* verb, int error, size_t done, size_t total) {
  std::string message = std::string(verb) + " " + socket.peer() + " failed after " +
                        std::to_string(done) + " of " + std::to_string(total) +
                        " bytes: " + errno_text(error);
  if (error == EPIPE || error == ECONNRESET || error == ENOTCONN || error == ETIMEDOUT ||
      error == EHOSTUNREACH || error == ENETUNREACH) {
    return RemoteError(std::move(message));
  }
  return SystemError(std::move(message));
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) {
    // close() releases the descriptor even when it reports EINTR on Linux;
    // retrying could close a descriptor another thread just opened.
    (void)::close(fd_);
  }
  fd_ = fd;
}

std::string errno_text(int error) {
  char buffer[256];
  buffer[0] = '\0';
  std::string text = strerror_result(strerror_r(error, buffer, sizeof(buffer)), buffer);
  // Out of descriptors: name the limit, which "Too many open files" does not.
  if (error == EMFILE) {
    const DescriptorUse use = descriptor_use();
    text += " (open file limit, ulimit -n " + (use.limit < 0 ? std::string("unlimited") : std::to_string(use.limit)) +
            ", reached: " + std::to_string(use.open) + " descriptors open)";
  } else if (error == ENFILE) {
    text += " (the system-wide open file limit, fs.file-max, is reached)";
  }
  return text;
}

milliseconds connect_retry_pause() {
  thread_local std::minstd_rand rng(static_cast<unsigned>(
      SocketClock::now().time_since_epoch().count() ^
      std::hash<std::thread::id>{}(std::this_thread::get_id())));
  std::uniform_int_distribution<int> jitter(0, static_cast<int>(kConnectRetryJitter.count()));
  return kConnectRetryBase + milliseconds(jitter(rng));
}

int poll_timeout_ms(SocketClock::time_point deadline) {
  const auto now = SocketClock::now();
  if (deadline <= now) return 0;
  const auto remaining = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<decltype(remaining)>(remaining, INT_MAX));
}

std::string format_address(const SocketAddress& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (address.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return host_port(host, port);
}

Status resolve_host(const std::string& host, uint16_t port, bool passive,
                    std::vector<SocketAddress>* out) {
  std::string error;
  if (resolve(host, port, passive, out, &error) != 0) {
    return InvalidArgument("cannot resolve host '" + host + "': " + error);
  }
  return Status::Ok();
}

bool is_loopback_host(const std::string& host, bool passive) {
  if (host.empty() && passive) return false;
  std::vector<SocketAddress> addresses;
  std::string error;
  if (resolve(host, 0, passive, &addresses, &error) != 0) return false;
  for (const SocketAddress& address : addresses) {
    if (address.family() == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
      if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) return false;
    } else if (address.family() == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
      const bool mapped_loopback =
          IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
      if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) && !mapped_loopback) return false;
    } else {
      return false;
    }
  }
  return true;
}

Status listen_tcp(const std::string& bind_host, uint16_t port, Socket* out, uint16_t* bound_port) {
  std::vector<SocketAddress> addresses;
  RR_RETURN_IF_ERROR(resolve_host(bind_host, port, /*passive=*/true, &addresses));
  if (bind_host.empty()) {
    // Prefer the IPv6 wildcard: with V6ONLY off it accepts IPv4 clients too.
    std::stable_partition(addresses.begin(), addresses.end(),
                          [](const SocketAddress& a) { return a.family() == AF_INET6; });
  }
  std::string last_error = "no address";
  for (const SocketAddress& address : addresses) {
    const std::string name = format_address(address);
    UniqueFd fd(
        socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
    if (!fd.valid()) {
      last_error = name + ": socket: " + errno_text(errno);
      continue;
    }
    // A restarted server must be able to take its port back while old
    // connections linger in TIME_WAIT.
    int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (address.family() == AF_INET6 && bind_host.empty()) {
      int zero = 0;
      (void)setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd.get(), address.addr(), address.length) != 0) {
      last_error = errno == EADDRINUSE
                       ? "port " + std::to_string(port) + " on " + (bind_host.empty() ? "*" : bind_host) +
                             " is in use by another process (bind: " + errno_text(errno) +
                             "); choose a free port (MASTER_PORT) or end what holds it"
                       : name + ": bind: " + errno_text(errno);
      continue;
    }
    if (listen(fd.get(), SOMAXCONN) != 0) {
      last_error = name + ": listen: " + errno_text(errno);
      continue;
    }
    SocketAddress bound;
    bound.length = sizeof(bound.storage);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound.storage), &bound.length) != 0) {
      last_error = name + ": getsockname: " + errno_text(errno);
      continue;
    }
    const uint16_t actual_port =
        bound.family() == AF_INET6
            ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound.storage)->sin6_port)
            : ntohs(reinterpret_cast<const sockaddr_in*>(&bound.storage)->sin_port);
    *out = Socket(std::move(fd), format_address(bound));
    *bound_port = actual_port;
    return Status::Ok();
  }
  return SystemError("cannot listen on " + host_port(bind_host.empty() ? "*" : bind_host, port) +
                     ": " + last_error);
}

Status accept_tcp(const Socket& listener, Socket* out, bool* accepted) {
  for (;;) {
    SocketAddress peer;
    peer.length = sizeof(peer.storage);
    int fd = accept4(listener.fd(), reinterpret_cast<sockaddr*>(&peer.storage), &peer.length,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      *out = Socket(UniqueFd(fd), format_address(peer));
      *accepted = true;
      return Status::Ok();
    }
    switch (errno) {
      case EINTR:
        continue;
      case EAGAIN:
#if EWOULDBLOCK != EAGAIN
      case EWOULDBLOCK:
#endif
      // The connection went away between arriving and being accepted: nothing
      // to accept, and nothing wrong with the listener.
      case ECONNABORTED:
      case EPROTO:
      case EPERM:
        *accepted = false;
        return Status::Ok();
      default:
        return SystemError("accept on " + listener.peer() + ": " + errno_text(errno));
    }
  }
}

Status connect_tcp(const std::string& host, uint16_t port, SocketClock::time_point deadline,
                   Socket* out) {
  const std::string target = host_port(host, port);
  const auto start = SocketClock::now();
  std::string last_error = "no attempt made before the deadline";
  int attempts = 0;
  for (;;) {
    std::vector<SocketAddress> addresses;
    std::string resolve_error;
    int rc = resolve(host, port, /*passive=*/false, &addresses, &resolve_error);
    bool transient = false;
    if (rc != 0) {
      last_error = "cannot resolve host '" + host + "': " + resolve_error;
      // The name may not exist yet (a pod that is still starting) or DNS may be
      // briefly unavailable; anything else is a bad argument.
      if (rc != EAI_AGAIN && rc != EAI_NONAME
#ifdef EAI_NODATA
          && rc != EAI_NODATA
#endif
      ) {
        return InvalidArgument("connect to " + target + ": " + last_error);
      }
      transient = true;
    }
    for (const SocketAddress& address : addresses) {
      ++attempts;
      UniqueFd fd;
      int error = connect_once(address, deadline, &fd);
      if (error == 0) {
        *out = Socket(std::move(fd), target);
        return Status::Ok();
      }
      last_error = errno_text(error);
      if (connect_error_is_transient(error)) transient = true;
    }
    if (!transient) return SystemError("connect to " + target + " failed: " + last_error);
    const auto now = SocketClock::now();
    if (now >= deadline) {
      const auto waited = std::chrono::duration_cast<milliseconds>(now - start).count();
      return Timeout("connect to " + target + " timed out after " + std::to_string(waited) +
                     " ms (" + std::to_string(attempts) + " attempts); last error: " + last_error);
    }
    std::this_thread::sleep_for(std::min<SocketClock::duration>(connect_retry_pause(), deadline - now));
  }
}

Status send_all(const Socket& socket, const void* data, size_t size,
                SocketClock::time_point deadline) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    // MSG_NOSIGNAL: a peer that went away is an EPIPE error here, not a
    // process-killing SIGPIPE.
    ssize_t n = ::send(socket.fd(), bytes + done, size - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RR_RETURN_IF_ERROR(wait_ready(socket, POLLOUT, deadline, "send to", done, size));
      continue;
    }
    return io_error(socket, "send to", n < 0 ? errno : EPIPE, done, size);
  }
  return Status::Ok();
}

Status recv_all(const Socket& socket, void* data, size_t size, SocketClock::time_point deadline) {
  auto* bytes = static_cast<uint8_t*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(socket.fd(), bytes + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return RemoteError("connection closed by " + socket.peer() + " after " +
                         std::to_string(done) + " of " + std::to_string(size) + " bytes");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RR_RETURN_IF_ERROR(wait_ready(socket, POLLIN, deadline, "receive from", done, size));
      continue;
    }
    return io_error(socket, "receive from", errno, done, size);
  }
  return Status::Ok();
}

}  // namespace rr::bootstrap
