// Where the same-host path's shared memory lives (transport/shm/segment.hpp's
// place_pages): a slot ring on the NUMA node of the rank that reads it, each
// board cell on the node of the rank that writes it, with a preferred-node
// policy on the segment and every page touched at once. This machine may
// have one node: the tests then check the policy and the pages on it, and
// that a node the machine lacks is refused by name.

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/shm/board.hpp"
#include "transport/shm/segment.hpp"
#include "transport/shm/slot_ring.hpp"

using rr::transport::shm::Board;
using rr::transport::shm::node_of_page;
using rr::transport::shm::preferred_node;
using rr::transport::shm::SlotRing;

namespace {

// The node this thread runs on, or -1 with the test skipped: a kernel
// without NUMA support has no policy to check.
int this_node() {
  unsigned cpu = 0, node = 0;
  if (syscall(SYS_getcpu, &cpu, &node, nullptr) != 0) return -1;
  return static_cast<int>(node);
}

// Pages of [address, address + bytes) in memory now (mincore), of how many.
size_t resident_pages(const void* address, size_t bytes, size_t* pages) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(address) / page * page;
  *pages = (reinterpret_cast<uintptr_t>(address) + bytes - start + page - 1) / page;
  std::vector<unsigned char> in(*pages);
  if (mincore(reinterpret_cast<void*>(start), *pages * page, in.data()) != 0) return 0;
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  return resident;
}

bool kernel_has_numa() {
  int probe = 0;
  return node_of_page(&probe) >= 0;
}

}  // namespace

TEST(ShmPlacement, SlotRingLivesOnItsReadersNode) {
  if (!kernel_has_numa()) GTEST_SKIP() << "this kernel has no NUMA policy (get_mempolicy fails)";
  const int node = this_node();
  ASSERT_GE(node, 0);
  std::unique_ptr<SlotRing> ring;
  ASSERT_TRUE(SlotRing::create(4, 64 << 10, &ring).ok());
  int before = -1;
  EXPECT_FALSE(preferred_node(ring->data(), &before)) << "a fresh ring has no policy yet";
  size_t pages = 0;
  EXPECT_EQ(resident_pages(ring->data(), 4 * (64 << 10), &pages), 0u) << "the slots are not touched yet";
  const rr::Status placed = ring->place(node);
  ASSERT_TRUE(placed.ok()) << placed.message();
  // Placed now, not at the sender's first write.
  EXPECT_EQ(resident_pages(ring->data(), 4 * (64 << 10), &pages), pages);
  const auto* first = static_cast<const uint8_t*>(ring->data());
  for (size_t offset : {size_t{0}, size_t{64} << 10, (size_t{4} * (64 << 10)) - 1}) {
    int preferred = -1;
    EXPECT_TRUE(preferred_node(first + offset, &preferred)) << "offset " << offset;
    EXPECT_EQ(preferred, node) << "offset " << offset;
    EXPECT_EQ(node_of_page(first + offset), node) << "offset " << offset;
  }
}

TEST(ShmPlacement, UnknownNodeLeavesTheRingAlone) {
  if (!kernel_has_numa()) GTEST_SKIP() << "this kernel has no NUMA policy (get_mempolicy fails)";
  std::unique_ptr<SlotRing> ring;
  ASSERT_TRUE(SlotRing::create(2, 4096, &ring).ok());
  ASSERT_TRUE(ring->place(-1).ok());
  int preferred = -1;
  EXPECT_FALSE(preferred_node(ring->data(), &preferred));
}

TEST(ShmPlacement, EachBoardCellLivesOnItsWritersNode) {
  if (!kernel_has_numa()) GTEST_SKIP() << "this kernel has no NUMA policy (get_mempolicy fails)";
  const int node = this_node();
  ASSERT_GE(node, 0);
  constexpr int kRanks = 3;
  std::unique_ptr<Board> board;
  ASSERT_TRUE(Board::create(kRanks, 32 << 10, &board).ok());
  // Rank 1's node unknown: its cell is left alone, the others placed.
  const rr::Status placed = board->place_cells({node, -1, node});
  ASSERT_TRUE(placed.ok()) << placed.message();
  for (int r = 0; r < kRanks; ++r) {
    const auto address = reinterpret_cast<uintptr_t>(board->cell_address(r));
    EXPECT_EQ(address % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), 0u) << "rank " << r << "'s cell";
    int preferred = -1;
    EXPECT_EQ(preferred_node(board->cell_address(r), &preferred), r != 1) << "rank " << r << "'s cell";
    if (r != 1) {
      EXPECT_EQ(preferred, node) << "rank " << r << "'s cell";
    }
  }
  EXPECT_FALSE(board->place_cells({node, node}).ok()) << "two nodes for three cells";
}

TEST(ShmPlacement, ANodeTheMachineLacksIsRefusedByName) {
  if (!kernel_has_numa()) GTEST_SKIP() << "this kernel has no NUMA policy (get_mempolicy fails)";
  std::unique_ptr<SlotRing> ring;
  ASSERT_TRUE(SlotRing::create(2, 4096, &ring).ok());
  // Node numbers are dense from 0; no test machine has 4000 of them.
  const rr::Status placed = ring->place(4000);
  ASSERT_FALSE(placed.ok());
  EXPECT_NE(placed.message().find("NUMA node 4000"), std::string::npos) << placed.message();
  const rr::Status beyond = ring->place(1 << 20);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.message().find("out of range"), std::string::npos) << beyond.message();
}
