#pragma once
// The staging pool: fixed-size slots for received chunks, made once per
// communicator, page-aligned and touched up front so no chunk on the data
// path allocates or faults a page in. A rank's extra memory is
// slot_bytes x slots, never proportional to the tensor.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace rr::memory {

class StagingPool {
 public:
  StagingPool() = default;
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Makes `slots` slots of `slot_bytes` each; a pool already at least that
  // large is kept as it is. Each growth counts as one allocation. With
  // `numa_node` >= 0 the pages are placed on that node where the kernel
  // allows (preferred, not required: a full node still gives memory);
  // placement() says where they went.
  Status reserve(size_t slot_bytes, size_t slots, int numa_node = -1);

  void* slot(size_t index) const { return base_ + index * slot_bytes_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t slots() const { return slots_; }
  void* data() const { return base_; }
  size_t bytes() const { return mapped_bytes_; }
  uint64_t allocations() const { return allocations_; }
  // The node the pages were placed on, or -1 (none asked, or refused).
  int numa_node() const { return numa_node_; }
  // "NUMA node 1", "first touch" or why the node asked for was refused.
  const std::string& placement() const { return placement_; }

 private:
  void release();

  uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  size_t slot_bytes_ = 0;
  size_t slots_ = 0;
  uint64_t allocations_ = 0;
  int numa_node_ = -1;
  std::string placement_ = "first touch";
};

}  // namespace rr::memory
