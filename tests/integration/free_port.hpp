#pragma once
// A TCP port on loopback that nothing listens on and that nothing else will
// take, for tests that need a rendezvous address of their own.
//
// Binding port 0 and closing it hands out a port from the kernel's ephemeral
// range, where every other bind(0) and every outgoing connection (UCX's
// listeners, the stores' clients) may take it again before rank 0 listens
// there: the test then fails with EADDRINUSE. So the port comes from below
// that range, at random, and is reserved with a lock file (flock) in
// /tmp/ringreduce-test-ports that other test processes respect, Python's
// (tests/python/ranks.py) included; this process holds it until it exits.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

inline uint16_t free_port() {
  int ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const int high = std::min(29500, ephemeral_low);  // 29500..: rendezvous ports derived from job ids
  const int low = std::max(1024, high - 14000);
  const std::string dir = "/tmp/ringreduce-test-ports";
  ::mkdir(dir.c_str(), 0777);
  std::random_device seed;
  std::mt19937 rng(seed());
  std::uniform_int_distribution<int> pick(low, high - 1);
  for (int attempt = 0; attempt < 10 * (high - low); ++attempt) {
    const int port = pick(rng);
    const int lock = ::open((dir + "/" + std::to_string(port)).c_str(), O_CREAT | O_RDONLY | O_CLOEXEC, 0644);
    if (lock < 0) continue;
    if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
      ::close(lock);
      continue;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (fd >= 0) ::close(fd);
    if (!bound) {  // someone listens there, or connections linger in TIME_WAIT
      ::close(lock);
      continue;
    }
    return static_cast<uint16_t>(port);  // the lock stays held: it is released when this process exits
  }
  throw std::runtime_error("free_port: no free port in " + std::to_string(low) + ".." + std::to_string(high - 1));
}
