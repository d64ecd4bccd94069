#pragma once
// The caches of the CPU this process runs on, as Linux describes them in
// sysfs (/sys/devices/system/cpu/cpuN/cache/indexM/: level, type, size).
// sysconf's _SC_LEVEL3_CACHE_SIZE is glibc's reading of cpuid, which in a
// VM can be the host's (320 MiB reported on a guest whose sysfs and lscpu
// say 32 MiB): sysfs is what the kernel found.

#include <cstddef>
#include <string>

namespace rr::topo {

// Bytes of the largest-level data or unified cache of the CPU this process
// runs on, or 0 when sysfs does not say. Read once per process.
size_t last_level_cache_bytes();

// A sysfs cache size ("32768K", "1M", "512"), in bytes; 0 when it is none.
size_t parse_cache_size(const std::string& text);

// The same, for the cache directory `cpu_cache_dir` (".../cpuN/cache"): for tests.
size_t last_level_cache_bytes_in(const std::string& cpu_cache_dir);

}  // namespace rr::topo
