// The in-process loopback transport (lib/transport/loopback/): matching by
// source and tag, in the order sent, and receives from kAnySource, which
// learn their sender; the per-peer byte counters follow the real sender.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/loopback/loopback.hpp"

namespace rr::transport {
namespace {

struct World {
  explicit World(int n) : fabric(std::make_shared<LoopbackFabric>(n)) {
    for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<LoopbackTransport>(fabric, r));
  }
  std::shared_ptr<LoopbackFabric> fabric;
  std::vector<std::unique_ptr<LoopbackTransport>> ranks;
};

void send(World& world, int from, int to, uint64_t tag, int32_t value) {
  Completion done;
  ASSERT_TRUE(world.ranks[from]->post_send(to, tag, &value, sizeof(value), &done).ok());
  ASSERT_TRUE(done.done);  // buffered
}

TEST(LoopbackTransport, AnySourceTakesTheFirstMessageOfItsTagAndNamesTheSender) {
  World world(3);
  LoopbackTransport& rank0 = *world.ranks[0];
  int32_t any = -1, from2 = -1, other_tag = -1;
  Completion any_done, from2_done, other_done;
  ASSERT_TRUE(rank0.post_recv(kAnySource, 5, &any, sizeof(any), &any_done).ok());
  ASSERT_TRUE(rank0.post_recv(2, 5, &from2, sizeof(from2), &from2_done).ok());
  ASSERT_TRUE(rank0.post_recv(kAnySource, 6, &other_tag, sizeof(other_tag), &other_done).ok());
  send(world, 2, 0, 6, 26);  // tag 6: only the tag-6 receive may take it
  send(world, 1, 0, 5, 15);
  send(world, 2, 0, 5, 25);
  while (!(any_done.done && from2_done.done && other_done.done)) rank0.progress();
  EXPECT_EQ(other_done.peer, 2);
  EXPECT_EQ(other_tag, 26);
  // Messages are matched in arrival order: rank 1's tag-5 message takes the
  // first posted receive that fits, the any-source one.
  EXPECT_EQ(any_done.peer, 1);
  EXPECT_EQ(any, 15);
  EXPECT_EQ(from2_done.peer, 2);
  EXPECT_EQ(from2, 25);
  EXPECT_EQ(rank0.bytes_received(1), sizeof(int32_t));
  EXPECT_EQ(rank0.bytes_received(2), 2 * sizeof(int32_t));
}

TEST(LoopbackTransport, OneSendersMessagesOfOneTagMatchInOrder) {
  World world(2);
  std::vector<int32_t> got(4, -1);
  std::vector<Completion> done(4);
  for (size_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(world.ranks[1]->post_recv(k % 2 ? 0 : kAnySource, 9, &got[k], sizeof(int32_t), &done[k]).ok());
  }
  for (int32_t v = 0; v < 4; ++v) send(world, 0, 1, 9, v);
  while (!done[3].done) world.ranks[1]->progress();
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  for (const Completion& d : done) EXPECT_EQ(d.peer, 0);
}

TEST(LoopbackTransport, CanceledAnySourceReceiveMatchesNothing) {
  World world(2);
  int32_t value = -1;
  Completion done;
  ASSERT_TRUE(world.ranks[1]->post_recv(kAnySource, 3, &value, sizeof(value), &done).ok());
  world.ranks[1]->cancel(&done);
  EXPECT_TRUE(done.done && done.failed);
  send(world, 0, 1, 3, 7);
  world.ranks[1]->progress();
  EXPECT_EQ(value, -1);
  EXPECT_EQ(done.peer, kAnySource);
}

}  // namespace
}  // namespace rr::transport
