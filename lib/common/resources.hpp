#pragma once
// What is left of two resources that run out in other libraries' words: UCX
// reports "Input/output error" or aborts when the process has no descriptor
// left, and "Out of memory" when /dev/shm is full. These say which resource
// it was, with the figures, so an error can name it.

#include <cstdint>
#include <string>

namespace rr {

// Descriptors this process has open and its soft RLIMIT_NOFILE (-1: none).
struct DescriptorUse {
  long open = 0;
  long limit = -1;
};
DescriptorUse descriptor_use();

// "open file limit (ulimit -n 32) reached: 29 descriptors open, ..." when
// fewer than `needed` descriptors are left under the limit; empty otherwise.
std::string descriptor_shortage(long needed);

// `bytes` in the largest unit of B, KiB, MiB, GiB, TiB that leaves at least
// 10 of it, rounded down: "4608 KiB", "21 GiB".
std::string in_units(uint64_t bytes);

// "/dev/shm is full: 12 KiB free of 1 MiB, ..." when /dev/shm has less than
// `needed` bytes free; empty otherwise, or when there is no /dev/shm.
std::string shm_shortage(uint64_t needed);

}  // namespace rr
