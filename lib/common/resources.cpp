#include "common/resources.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

namespace rr {

std::string in_units(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 10 * 1024 && unit < 4) bytes /= 1024, ++unit;
  return std::to_string(bytes) + " " + kUnits[unit];
}

DescriptorUse descriptor_use() {
  DescriptorUse use;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) use.open += entry->d_name[0] != '.' ? 1 : 0;
    closedir(dir);
    use.open -= 1;  // the directory's own
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    use.limit = static_cast<long>(limit.rlim_cur);
  }
  return use;
}

std::string descriptor_shortage(long needed) {
  const DescriptorUse use = descriptor_use();
  if (use.limit < 0 || use.limit - use.open >= needed) return {};
  return "open file limit (ulimit -n " + std::to_string(use.limit) + ") reached: " + std::to_string(use.open) +
         " descriptors are open and about " + std::to_string(needed) +
         " more are needed; raise the limit (ulimit -n, LimitNOFILE= under systemd)";
}

std::string shm_shortage(uint64_t needed) {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return {};
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= needed) return {};
  const uint64_t total = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  return "/dev/shm is full: " + in_units(free_bytes) + " free of " + in_units(total) + ", and about " +
         in_units(needed) + " are needed there; free space in /dev/shm (or give it more), or keep shared memory "
         "out with UCX_TLS (e.g. UCX_TLS=tcp)";
}

}  // namespace rr
