#include "transport/shm/slot_ring.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "transport/shm/segment.hpp"

namespace rr::transport::shm {

namespace {
constexpr const char* kWhat = "shared-memory ring";
}  // namespace

SlotRing::~SlotRing() {
  if (mapping_) munmap(mapping_, mapping_bytes_);
  close_fd();
}

void SlotRing::close_fd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Status SlotRing::map(int fd, size_t slots, size_t slot_bytes, bool fresh, std::unique_ptr<SlotRing>* out) {
  const size_t bytes = kDataOffset + slots * slot_bytes;
  void* mapping = nullptr;
  RR_RETURN_IF_ERROR(map_segment(kWhat, fd, bytes, &mapping));
  std::unique_ptr<SlotRing> ring(new SlotRing());
  ring->fd_ = fd;
  ring->mapping_ = mapping;
  ring->mapping_bytes_ = bytes;
  ring->control_ = static_cast<Control*>(mapping);
  ring->data_ = static_cast<uint8_t*>(mapping) + kDataOffset;
  ring->slots_ = slots;
  ring->slot_bytes_ = slot_bytes;
  Control* control = ring->control_;
  if (fresh) {
    // A new memfd reads as zeros: the counters start at 0.
    control->slots = slots;
    control->slot_bytes = slot_bytes;
    std::atomic_thread_fence(std::memory_order_release);
    control->magic = kMagic;
  } else if (control->magic != kMagic || control->slots != slots || control->slot_bytes != slot_bytes) {
    ring->fd_ = -1;  // the caller closes it
    return InternalError("shared-memory ring: the segment is not a ring of " + std::to_string(slots) + " x " +
                         std::to_string(slot_bytes) + " bytes");
  } else {
    ring->head_ = control->head.load(std::memory_order_acquire);
    ring->tail_seen_ = control->tail.load(std::memory_order_acquire);
  }
  *out = std::move(ring);
  return Status::Ok();
}

bool SlotRing::shape_ok(size_t slots, size_t slot_bytes) {
  return slots >= 2 && slots <= kMaxSlots && slot_bytes != 0 && slot_bytes % 64 == 0;
}

Status SlotRing::create(size_t slots, size_t slot_bytes, std::unique_ptr<SlotRing>* out) {
  if (!shape_ok(slots, slot_bytes)) {
    return InvalidArgument("shared-memory ring: " + std::to_string(slots) + " slots of " +
                           std::to_string(slot_bytes) + " bytes (expected 2.." + std::to_string(kMaxSlots) +
                           " slots of a multiple of 64 bytes)");
  }
  int fd = -1;
  RR_RETURN_IF_ERROR(create_segment(kWhat, "ringreduce-slots", kDataOffset + slots * slot_bytes, &fd));
  Status mapped = map(fd, slots, slot_bytes, true, out);
  if (!mapped.ok()) close(fd);
  return mapped;
}

Status SlotRing::place(int node) { return place_pages(kWhat, mapping_, mapping_bytes_, node); }

Status SlotRing::attach(int pid, int fd, size_t slots, size_t slot_bytes, std::unique_ptr<SlotRing>* out) {
  if (!shape_ok(slots, slot_bytes) || pid <= 0 || fd < 0) {
    return InvalidArgument("shared-memory ring: a peer offered pid " + std::to_string(pid) + " fd " +
                           std::to_string(fd) + ", " + std::to_string(slots) + " slots of " +
                           std::to_string(slot_bytes) + " bytes");
  }
  int local = -1;
  RR_RETURN_IF_ERROR(copy_descriptor(kWhat, pid, fd, &local));
  Status mapped = map(local, slots, slot_bytes, false, out);
  if (!mapped.ok()) {
    close(local);
    return mapped;
  }
  (*out)->close_fd();  // the mapping is all the sender needs
  return Status::Ok();
}

void SlotRing::wake(std::atomic<uint32_t>* counter, std::atomic<uint32_t>* sleeps) {
  sleeps->store(0, std::memory_order_relaxed);
  futex_wake_all(counter);
}

void SlotRing::sleep_on(std::atomic<uint32_t>* counter, uint32_t seen, std::atomic<uint32_t>* sleeps,
                        int timeout_ms) {
  // Say so before the last look: the other side then either saw the flag
  // after its store (and wakes us) or stored before our look (no sleep).
  sleeps->store(1, std::memory_order_seq_cst);
  if (counter->load(std::memory_order_seq_cst) == seen) futex_wait(counter, seen, timeout_ms);
  sleeps->store(0, std::memory_order_relaxed);
}

void SlotRing::wait_readable(int timeout_ms) { sleep_on(&control_->head, tail_, &control_->reader_sleeps, timeout_ms); }

void SlotRing::wait_writable(int timeout_ms) {
  // Full means tail == head - slots; wait for tail to move from there.
  sleep_on(&control_->tail, head_ - static_cast<uint32_t>(slots_), &control_->writer_sleeps, timeout_ms);
}

}  // namespace rr::transport::shm
