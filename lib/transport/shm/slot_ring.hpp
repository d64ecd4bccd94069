#pragma once
// A one-way ring of fixed-size slots in memory shared by two processes on
// one host: the same-host data path of the ring (exec/shm_ring_executor.hpp).
// The sender writes a chunk into the next free slot and publishes it; the
// receiver reads it where it lies (a reduction reads it in place) and frees
// the slot. Slots are few and small, so that the chunks they carry stay in
// the caches and never make a round trip through DRAM.
//
// The receiving side makes the ring (an anonymous memfd, so nothing is ever
// left in /dev/shm, whatever kills the processes) and tells the sender its
// pid and descriptor; the sender copies the descriptor with pidfd_getfd
// (Linux 5.6, the same permission as UCX's CMA: a process of the same user).
// Once both have mapped it, both close their descriptors: the memory goes
// when the last mapping does.
//
// One thread per side. No system call on the data path: a side that waits
// long asks the other to wake it (a futex on the shared counter), and the
// other pays the wake-up only then.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.hpp"

namespace rr::transport::shm {

class SlotRing {
 public:
  SlotRing(const SlotRing&) = delete;
  SlotRing& operator=(const SlotRing&) = delete;
  ~SlotRing();

  // The receiving side: a ring of `slots` slots of `slot_bytes` each
  // (a multiple of 64), mapped here; fd() is what the sender attaches to.
  [[nodiscard]] static Status create(size_t slots, size_t slot_bytes, std::unique_ptr<SlotRing>* out);
  // The sending side: maps the ring that process `pid` made as its
  // descriptor `fd`, which must have `slots` x `slot_bytes`.
  [[nodiscard]] static Status attach(int pid, int fd, size_t slots, size_t slot_bytes, std::unique_ptr<SlotRing>* out);

  // The receiving side, before it offers the ring: the ring on NUMA node
  // `node` (-1: left where the kernel puts it), every page touched now
  // (segment.hpp's place_pages). The receiver reads each chunk where it
  // lies, so the ring lives where the reader runs.
  [[nodiscard]] Status place(int node);
  // The first slot, for the placement's tests.
  const void* data() const { return data_; }

  // The receiving side's descriptor, until close_fd() (-1 after).
  int fd() const { return fd_; }
  // Once the sender has attached: the mapping is all either side needs.
  void close_fd();

  size_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Receiving side. The oldest published slot and its length, or null when
  // none is published yet; pop() frees it.
  const void* front(size_t* bytes) {
    if (head_seen_ == tail_) {
      head_seen_ = control_->head.load(std::memory_order_acquire);
      if (head_seen_ == tail_) return nullptr;
    }
    const uint32_t index = tail_ % static_cast<uint32_t>(slots_);
    *bytes = control_->lengths[index];
    return data_ + static_cast<size_t>(index) * slot_bytes_;
  }
  void pop() {
    ++tail_;
    control_->tail.store(tail_, std::memory_order_seq_cst);
    if (control_->writer_sleeps.load(std::memory_order_seq_cst) != 0) wake(&control_->tail, &control_->writer_sleeps);
  }

  // Sending side. A free slot, or null when all are published and not yet
  // popped; push() publishes `bytes` of it.
  void* back() {
    if (head_ - tail_seen_ >= slots_) {
      tail_seen_ = control_->tail.load(std::memory_order_acquire);
      if (head_ - tail_seen_ >= slots_) return nullptr;
    }
    return data_ + static_cast<size_t>(head_ % static_cast<uint32_t>(slots_)) * slot_bytes_;
  }
  void push(size_t bytes) {
    control_->lengths[head_ % static_cast<uint32_t>(slots_)] = bytes;
    ++head_;
    control_->head.store(head_, std::memory_order_seq_cst);
    if (control_->reader_sleeps.load(std::memory_order_seq_cst) != 0) wake(&control_->head, &control_->reader_sleeps);
  }

  // Sleep until the other side pushed (receiver) or popped (sender), or at
  // most `timeout_ms`; a spurious return is fine.
  void wait_readable(int timeout_ms);
  void wait_writable(int timeout_ms);

  // How many slots the sender has published so far (for tests).
  uint32_t published() const { return control_->head.load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kMagic = 0x72722d736c6f7431;  // "rr-slot1"
  static constexpr size_t kMaxSlots = 64;

  // The first page of the segment. Each counter has a cache line of its own:
  // head is written by the sender only, tail by the receiver only.
  struct Control {
    uint64_t magic;
    uint64_t slots;
    uint64_t slot_bytes;
    alignas(64) std::atomic<uint32_t> head;  // slots published, ever (wraps)
    std::atomic<uint32_t> reader_sleeps;     // the receiver waits on head
    alignas(64) std::atomic<uint32_t> tail;  // slots popped, ever (wraps)
    std::atomic<uint32_t> writer_sleeps;     // the sender waits on tail
    alignas(64) uint64_t lengths[kMaxSlots];  // bytes published in each slot
  };
  static_assert(sizeof(Control) <= 4096, "the control block fits the first page");
  static constexpr size_t kDataOffset = 4096;

  SlotRing() = default;
  // 2..kMaxSlots slots of a nonzero multiple of 64 bytes.
  static bool shape_ok(size_t slots, size_t slot_bytes);
  [[nodiscard]] static Status map(int fd, size_t slots, size_t slot_bytes, bool fresh, std::unique_ptr<SlotRing>* out);
  static void wake(std::atomic<uint32_t>* counter, std::atomic<uint32_t>* sleeps);
  static void sleep_on(std::atomic<uint32_t>* counter, uint32_t seen, std::atomic<uint32_t>* sleeps, int timeout_ms);

  int fd_ = -1;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  Control* control_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t slots_ = 0;
  size_t slot_bytes_ = 0;
  // This side's own counter, and its last look at the other's.
  uint32_t head_ = 0, tail_seen_ = 0;  // sender
  uint32_t tail_ = 0, head_seen_ = 0;  // receiver
};

}  // namespace rr::transport::shm
