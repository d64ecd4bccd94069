#include "memory/staging_pool.hpp"

#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/resources.hpp"

namespace rr::memory {

namespace {
constexpr size_t kSlotAlign = 4096;  // page: keeps slots apart and DMA-friendly
size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Asks the kernel to take the pages of [p, p + bytes) from `node` when they
// are first touched (MPOL_PREFERRED). Empty on success, else why not.
std::string prefer_node(void* p, size_t bytes, int node) {
  constexpr int kMaxNodes = 1024;
  constexpr int kBits = 8 * sizeof(unsigned long);
  if (node >= kMaxNodes) return "NUMA node " + std::to_string(node) + " is beyond the " + std::to_string(kMaxNodes) + " supported";
  unsigned long mask[kMaxNodes / kBits] = {};
  mask[node / kBits] = 1UL << (node % kBits);
  // maxnode counts one past the mask's last bit, as the kernel reads it.
  if (syscall(SYS_mbind, p, bytes, MPOL_PREFERRED, mask, static_cast<unsigned long>(kMaxNodes) + 1, 0) != 0) {
    return "mbind to NUMA node " + std::to_string(node) + ": " + std::strerror(errno);
  }
  return {};
}
// MemAvailable from /proc/meminfo in bytes, or 0 where it cannot be read.
uint64_t available_memory() {
  uint64_t kib = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[128];
    while (std::fgets(line, sizeof(line), f)) {
      unsigned long long value = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &value) == 1) {
        kib = value;
        break;
      }
    }
    std::fclose(f);
  }
  return kib * 1024;
}

}  // namespace

StagingPool::~StagingPool() { release(); }

void StagingPool::release() {
  if (base_) munmap(base_, mapped_bytes_);
  base_ = nullptr;
  mapped_bytes_ = 0;
}

Status StagingPool::reserve(size_t slot_bytes, size_t slots, int numa_node) {
  const size_t aligned_slot = round_up(slot_bytes == 0 ? 1 : slot_bytes, kSlotAlign);
  if (base_ && aligned_slot <= slot_bytes_ && slots <= slots_ && (numa_node < 0 || numa_node == numa_node_)) {
    return Status::Ok();
  }
  if (slots > 0 && aligned_slot > SIZE_MAX / slots) {
    return InvalidArgument("staging pool: " + std::to_string(slots) + " slots of " + std::to_string(aligned_slot) +
                           " bytes overflow size_t");
  }
  const size_t bytes = aligned_slot * slots;
  // Every page is written below: a pool larger than the memory the host has
  // free would be killed for it (the OOM killer), not refused by mmap.
  const uint64_t available = available_memory();
  if (available > 0 && bytes > available) {
    return SystemError("staging pool: " + in_units(bytes) + " (" + std::to_string(slots) + " slots of " +
                       in_units(aligned_slot) + ") is more than the " + in_units(available) +
                       " of memory this host has available (MemAvailable); lower the chunk size or the pipeline "
                       "depth (RR_CHUNK_BYTES, RR_PIPELINE_DEPTH)");
  }
  // Placed pages must not be faulted in before the policy is set.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (numa_node >= 0 ? 0 : MAP_POPULATE), -1, 0);
  if (p == MAP_FAILED) {
    return SystemError("staging pool: cannot map " + std::to_string(bytes) + " bytes: " +
                       std::strerror(errno));
  }
  numa_node_ = -1;
  placement_ = "first touch";
  if (numa_node >= 0) {
    const std::string refused = prefer_node(p, bytes, numa_node);
    if (refused.empty()) {
      numa_node_ = numa_node;
      placement_ = "NUMA node " + std::to_string(numa_node);
    } else {
      placement_ = "first touch (" + refused + ")";
    }
  }
  release();
  base_ = static_cast<uint8_t*>(p);
  mapped_bytes_ = bytes;
  slot_bytes_ = aligned_slot;
  slots_ = slots;
  // Writing every page faults it in now (on the preferred node, if any) and
  // makes it a private page of this process, not the shared zero page.
  std::memset(base_, 0, bytes);
  ++allocations_;
  return Status::Ok();
}

}  // namespace rr::memory
