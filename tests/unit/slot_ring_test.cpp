// The same-host slot ring (transport/shm/slot_ring.hpp) between two real
// processes: the receiver makes it, a forked sender attaches by pid and
// descriptor, and every slot arrives whole, in order, with its length,
// through many laps of the ring and across sleeps on both sides.

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "transport/shm/slot_ring.hpp"

using rr::transport::shm::SlotRing;

namespace {

constexpr size_t kSlots = 4;
constexpr size_t kSlotBytes = 256;
constexpr uint32_t kMessages = 20000;

// Message i: its length and bytes, a function of i only.
size_t length_of(uint32_t i) { return 1 + (i * 2654435761u) % kSlotBytes; }
uint8_t byte_of(uint32_t i, size_t k) { return static_cast<uint8_t>(i * 31 + k * 7 + 1); }

// The sender, in a child: attaches to the parent's ring and pushes every
// message, sleeping now and then when the ring is full. Exit 0: all sent.
int send_all(int pid, int fd) {
  std::unique_ptr<SlotRing> ring;
  if (!SlotRing::attach(pid, fd, kSlots, kSlotBytes, &ring).ok()) return 2;
  for (uint32_t i = 0; i < kMessages; ++i) {
    void* slot = nullptr;
    while ((slot = ring->back()) == nullptr) {
      if (i % 3 == 0) ring->wait_writable(50);
    }
    const size_t n = length_of(i);
    auto* bytes = static_cast<uint8_t*>(slot);
    for (size_t k = 0; k < n; ++k) bytes[k] = byte_of(i, k);
    ring->push(n);
  }
  return 0;
}

TEST(SlotRing, CarriesEveryMessageInOrderBetweenProcesses) {
  std::unique_ptr<SlotRing> ring;
  ASSERT_TRUE(SlotRing::create(kSlots, kSlotBytes, &ring).ok());
  const int parent = static_cast<int>(getpid());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(send_all(parent, ring->fd()));

  uint32_t wrong = 0;
  for (uint32_t i = 0; i < kMessages; ++i) {
    const void* data = nullptr;
    size_t n = 0;
    while ((data = ring->front(&n)) == nullptr) {
      if (i % 5 == 0) ring->wait_readable(50);
    }
    if (n != length_of(i)) {
      ++wrong;
    } else {
      const auto* bytes = static_cast<const uint8_t*>(data);
      for (size_t k = 0; k < n; ++k) wrong += bytes[k] != byte_of(i, k);
    }
    ring->pop();
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the sender could not attach (2) or failed";
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(ring->published(), kMessages);
}

TEST(SlotRing, FullWhenEverySlotIsPublishedAndFreedByPop) {
  std::unique_ptr<SlotRing> receiver;
  ASSERT_TRUE(SlotRing::create(kSlots, kSlotBytes, &receiver).ok());
  // The sender may be this process too (pidfd_getfd on itself).
  std::unique_ptr<SlotRing> sender;
  rr::Status attached = SlotRing::attach(static_cast<int>(getpid()), receiver->fd(), kSlots, kSlotBytes, &sender);
  ASSERT_TRUE(attached.ok()) << attached.message();
  for (size_t i = 0; i < kSlots; ++i) {
    void* slot = sender->back();
    ASSERT_NE(slot, nullptr) << i;
    std::memset(slot, static_cast<int>(i), 8);
    sender->push(8);
  }
  EXPECT_EQ(sender->back(), nullptr) << "a full ring offers no slot";
  size_t n = 0;
  const void* first = receiver->front(&n);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(first)[0], 0);
  receiver->pop();
  EXPECT_NE(sender->back(), nullptr) << "a popped slot is free again";
  for (size_t i = 1; i < kSlots; ++i) {
    ASSERT_NE(receiver->front(&n), nullptr);
    receiver->pop();
  }
  EXPECT_EQ(receiver->front(&n), nullptr) << "an empty ring offers nothing";
}

TEST(SlotRing, RefusesBadShapesAndForeignSegments) {
  std::unique_ptr<SlotRing> ring;
  EXPECT_EQ(SlotRing::create(1, kSlotBytes, &ring).code(), rr::Code::kInvalidArgument);
  EXPECT_EQ(SlotRing::create(kSlots, 100, &ring).code(), rr::Code::kInvalidArgument);
  ASSERT_TRUE(SlotRing::create(kSlots, kSlotBytes, &ring).ok());
  // Another shape than the segment has: refused, naming what it expected.
  std::unique_ptr<SlotRing> other;
  rr::Status wrong = SlotRing::attach(static_cast<int>(getpid()), ring->fd(), kSlots * 2, kSlotBytes, &other);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("bytes"), std::string::npos) << wrong.message();
  // A descriptor that is not open there.
  wrong = SlotRing::attach(static_cast<int>(getpid()), 100000, kSlots, kSlotBytes, &other);
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("pidfd_getfd"), std::string::npos) << wrong.message();
  // Nothing is left open once the receiver closed its descriptor.
  const int fd = ring->fd();
  ring->close_fd();
  EXPECT_EQ(ring->fd(), -1);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

}  // namespace
