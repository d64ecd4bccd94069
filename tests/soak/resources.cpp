#include "resources.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
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

// Distinct shared-memory objects in /proc/self/maps, by (device, inode),
// with the path each shows: POSIX segments as /dev/shm/NAME (or
// "... (deleted)" once unlinked), SysV ones as /SYSVkey.
std::map<std::pair<std::string, unsigned long>, std::string> mapped_shm() {
  std::map<std::pair<std::string, unsigned long>, std::string> seen;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return seen;
  char line[4096];
  while (std::fgets(line, sizeof(line), f)) {
    char device[32] = {0};
    unsigned long inode = 0;
    int path_at = 0;
    if (std::sscanf(line, "%*s %*s %*s %31s %lu %n", device, &inode, &path_at) < 2 || path_at == 0) continue;
    std::string path = line + path_at;
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (path.rfind("/dev/shm/", 0) == 0 || path.rfind("/SYSV", 0) == 0) seen.emplace(std::make_pair(device, inode), path);
  }
  std::fclose(f);
  return seen;
}

int mapped_segments() { return static_cast<int>(mapped_shm().size()); }

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

Inventory take_inventory() {
  Inventory inv;
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int own = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == own) continue;
      char target[512];
      const std::string link = std::string("/proc/self/fd/") + entry->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      inv.fds.push_back(n > 0 ? std::string(target, static_cast<size_t>(n)) : "?");
    }
    closedir(dir);
  }
  for (const auto& segment : mapped_shm()) inv.segments.push_back(segment.second);
  std::sort(inv.fds.begin(), inv.fds.end());
  std::sort(inv.segments.begin(), inv.segments.end());
  return inv;
}

std::string added(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  // Names differ only in their numbers ("socket:[123]"): count by kind too
  // would hide which; listed whole, each with how many more.
  std::map<std::string, int> more;
  for (const std::string& name : after) ++more[name];
  for (const std::string& name : before) --more[name];
  std::string out;
  for (const auto& [name, n] : more) {
    if (n <= 0) continue;
    out += (out.empty() ? "" : ", ") + name + (n > 1 ? " x" + std::to_string(n) : "");
  }
  return out;
}

}  // namespace soak
