#include "resources.hpp"

#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace soak {

namespace {

// Entries of a directory, without . and .. (opendir's own fd is counted in
// /proc/self/fd as one more, the same at every sample).
int count_entries(const char* path) {
  DIR* dir = opendir(path);
  if (!dir) return -1;
  int n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) ++n;
  }
  closedir(dir);
  return n;
}

// The number after `field` in /proc/self/status ("VmRSS:\t  1234 kB").
uint64_t status_field(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t value = 0;
  const size_t length = std::strlen(field);
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, field, length) == 0) {
      value = std::strtoull(line + length, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return value;
}

// Distinct shared-memory objects in /proc/self/maps: POSIX segments show as
// /dev/shm/NAME (or "(deleted)" once unlinked), SysV ones as /SYSVkey.
int mapped_segments() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  std::set<std::pair<std::string, unsigned long>> seen;  // (device, inode)
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    char device[32] = {0};
    unsigned long inode = 0;
    int path_at = 0;
    if (std::sscanf(line, "%*s %*s %*s %31s %lu %n", device, &inode, &path_at) < 2 || path_at == 0) continue;
    const char* path = line + path_at;
    if (std::strncmp(path, "/dev/shm/", 9) == 0 || std::strncmp(path, "/SYSV", 5) == 0) seen.emplace(device, inode);
  }
  std::fclose(f);
  return static_cast<int>(seen.size());
}

}  // namespace

std::vector<std::string> shm_segments() {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return names;
  while (const dirent* entry = readdir(dir)) {
    // Segments are files: directories (a test's scratch) are not counted.
    if (entry->d_type == DT_REG || entry->d_type == DT_UNKNOWN) {
      if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) names.push_back(entry->d_name);
    }
  }
  closedir(dir);
  return names;
}

Sample sample_resources() {
  Sample s;
  s.rss_kib = status_field("VmRSS:");
  s.threads = static_cast<int>(status_field("Threads:"));
  s.fds = count_entries("/proc/self/fd");
  s.shm_entries = static_cast<int>(shm_segments().size());
  s.shm_mapped = mapped_segments();
  return s;
}

}  // namespace soak
