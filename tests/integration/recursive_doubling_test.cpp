// The latency path on real ranks: allreduce by recursive doubling
// (lib/algo/recursive_doubling.hpp) sends exactly its messages, and the
// size-based choice sends a small message that way by default. The rest of
// collectives_test runs under RR_ALGO=rd too (tests/integration/meson.build:
// allreduce_rd_*), checking every dtype x op x count against the reference.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "algo/recursive_doubling.hpp"
#include "collectives_env.hpp"

using namespace collectives_env;

namespace {

bool forced(const char* algo) {
  const char* value = std::getenv("RR_ALGO");
  return value && std::strcmp(value, algo) == 0;
}

// Bytes this rank sent to each peer during `call`.
template <typename Call>
std::vector<uint64_t> sent_during(rrComm_t comm, Call call) {
  std::vector<uint64_t> before(static_cast<size_t>(g_size)), after(static_cast<size_t>(g_size));
  uint64_t received = 0;
  for (int p = 0; p < g_size; ++p) EXPECT_EQ(rrCommGetPeerBytes(comm, p, &before[static_cast<size_t>(p)], &received), rrSuccess);
  call();
  for (int p = 0; p < g_size; ++p) {
    EXPECT_EQ(rrCommGetPeerBytes(comm, p, &after[static_cast<size_t>(p)], &received), rrSuccess);
    after[static_cast<size_t>(p)] -= before[static_cast<size_t>(p)];
  }
  return after;
}

// Before each collective a rank sends its 32-byte operation header to both
// ring neighbours (one when there are two ranks).
uint64_t header_bytes(int peer) {
  if (g_size == 1) return 0;
  const bool neighbour = peer == (g_rank + 1) % g_size || peer == (g_rank + g_size - 1) % g_size;
  return neighbour ? 32 : 0;
}

TEST(RecursiveDoubling, SendsTheWholeBufferOncePerMessageOfItsPlan) {
  if (!forced("rd") && g_size > 1) GTEST_SKIP() << "runs with RR_ALGO=rd (allreduce_rd_* tests)";
  const size_t count = 1031;  // a prime; fits one staging slot
  std::vector<float> data(count, 1.0f);
  const std::vector<uint64_t> sent = sent_during(g_comm, [&] {
    ASSERT_EQ(rrAllReduce(data.data(), data.data(), count, rrFloat32, rrSum, g_comm, nullptr), rrSuccess)
        << rrGetLastError(g_comm);
  });
  for (float x : data) ASSERT_EQ(x, static_cast<float>(g_size));
  const rr::algo::RecursiveDoubling plan(g_size, g_rank);
  uint64_t total = 0;
  for (int p = 0; p < g_size; ++p) total += sent[static_cast<size_t>(p)] - header_bytes(p);
  EXPECT_EQ(total, static_cast<uint64_t>(plan.messages_sent()) * count * sizeof(float));
  // To its partners only.
  for (int p = 0; p < g_size; ++p) {
    bool partner = p == plan.sits_out_for() || p == plan.folds_in();
    for (int round = 0; round < plan.rounds(); ++round) partner = partner || p == plan.partner(round);
    if (!partner) EXPECT_EQ(sent[static_cast<size_t>(p)], header_bytes(p)) << "sent data to rank " << p;
  }
}

TEST(RecursiveDoubling, SmallMessagesTakeItByDefault) {
  if (std::getenv("RR_ALGO") || g_size == 1) GTEST_SKIP() << "the default choice (RR_ALGO unset), on 2+ ranks";
  // 8 bytes: the model picks recursive doubling on every rank count; the
  // ring would send 2(N-1) pieces of a 2-float buffer, some of them empty.
  float data[2] = {1.0f, 2.0f};
  const std::vector<uint64_t> sent = sent_during(g_comm, [&] {
    ASSERT_EQ(rrAllReduce(data, data, 2, rrFloat32, rrSum, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  });
  EXPECT_EQ(data[0], static_cast<float>(g_size));
  EXPECT_EQ(data[1], 2.0f * static_cast<float>(g_size));
  uint64_t total = 0;
  for (int p = 0; p < g_size; ++p) total += sent[static_cast<size_t>(p)] - header_bytes(p);
  EXPECT_EQ(total, static_cast<uint64_t>(rr::algo::RecursiveDoubling(g_size, g_rank).messages_sent()) * 8);
}

}  // namespace
