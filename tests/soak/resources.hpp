#pragma once
// What a long-running rank holds, read from /proc: the figures the soak
// samples over time and requires to stay flat after warm-up.

#include <cstdint>
#include <string>
#include <vector>

namespace soak {

struct Sample {
  double t = 0;             // seconds since the loop started
  uint64_t calls = 0;       // calls finished by then
  uint64_t rss_kib = 0;     // /proc/self/status VmRSS
  int fds = 0;              // entries of /proc/self/fd
  int threads = 0;          // /proc/self/status Threads
  int shm_entries = 0;      // files in /dev/shm (the whole machine's POSIX shared-memory segments)
  int shm_mapped = 0;       // shared-memory segments this process maps (/dev/shm files and SysV), by inode
};

// The names of the files in /dev/shm.
std::vector<std::string> shm_segments();

// What the open fds point at (readlink of /proc/self/fd/N: "socket:[123]",
// "anon_inode:[eventfd]", "/memfd:rr-slots (deleted)", ...) and the mapped
// shared-memory segments by name ("/dev/shm/NAME (deleted)", "/SYSV..."),
// each with a count: a growth report says whose the new ones are.
struct Inventory {
  std::vector<std::string> fds;       // sorted
  std::vector<std::string> segments;  // sorted, one per segment
};
Inventory take_inventory();
// What `after` holds beyond `before`, as "name" or "name x3", comma-separated
// ("" when nothing).
std::string added(const std::vector<std::string>& before, const std::vector<std::string>& after);

// t and calls are the caller's to fill.
Sample sample_resources();

}  // namespace soak
