#include "ports.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "fd.hpp"

namespace rr::run {

namespace {

// The lowest port of the kernel's ephemeral range (ip_local_port_range).
int ephemeral_low() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  return low;
}

// Whether `port` can be bound on every address `addr` resolves to now.
bool can_bind(const std::string& addr, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    error = gai_strerror(rc);
    return false;
  }
  bool ok = found != nullptr;
  for (addrinfo* ai = found; ai != nullptr && ok; ai = ai->ai_next) {
    Fd sock(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!sock.valid() || ::bind(sock.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      error = "port " + std::to_string(port) + ": " + errno_text(errno);
      ok = false;
    }
  }
  ::freeaddrinfo(found);
  return ok;
}

}  // namespace

// A port on the master address that nothing listens on, or 0. It is free
// again before rank 0 binds it, so it is drawn at random from below the
// kernel's ephemeral range: a bind to port 0 would hand out one from that
// range, where every other bind(0) and every outgoing connection (UCX's
// listeners, the store's clients, any program on the host) may take it first,
// and rank 0 then fails to listen. Below it, only another launcher drawing the
// same port within that moment can; --master-port exists for when even that
// matters. 29500 and up is left to ports derived from job ids.
int pick_free_port(const std::string& addr, std::string& error) {
  const int high = std::min(29500, ephemeral_low());
  const int low = std::max(1024, high - 14000);
  uint64_t draw = 0;
  error = "no port tried";
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (::getrandom(&draw, sizeof draw, 0) != static_cast<ssize_t>(sizeof draw)) draw = draw * 6364136223846793005ull + 1;
    const int port = low + static_cast<int>(draw % static_cast<uint64_t>(high - low));
    if (can_bind(addr, port, error)) return port;
  }
  return 0;
}

}  // namespace rr::run
