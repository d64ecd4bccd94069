#include "memory/staging_pool.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace rr::memory {

namespace {
constexpr size_t kSlotAlign = 4096;  // page: keeps slots apart and DMA-friendly
size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
}  // namespace

StagingPool::~StagingPool() { release(); }

void StagingPool::release() {
  if (base_) munmap(base_, mapped_bytes_);
  base_ = nullptr;
  mapped_bytes_ = 0;
}

Status StagingPool::reserve(size_t slot_bytes, size_t slots) {
  const size_t aligned_slot = round_up(slot_bytes == 0 ? 1 : slot_bytes, kSlotAlign);
  if (base_ && aligned_slot <= slot_bytes_ && slots <= slots_) return Status::Ok();
  const size_t bytes = aligned_slot * slots;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) {
    return SystemError("staging pool: cannot map " + std::to_string(bytes) + " bytes: " +
                       std::strerror(errno));
  }
  release();
  base_ = static_cast<uint8_t*>(p);
  mapped_bytes_ = bytes;
  slot_bytes_ = aligned_slot;
  slots_ = slots;
  // MAP_POPULATE already faulted the pages in; writing them makes sure they are
  // private pages of this process, not the shared zero page.
  std::memset(base_, 0, bytes);
  ++allocations_;
  return Status::Ok();
}

}  // namespace rr::memory
