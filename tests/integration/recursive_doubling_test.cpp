// The latency paths on real ranks: allreduce by recursive doubling
// (lib/algo/recursive_doubling.hpp) sends exactly its messages; on one host
// the one-shot schedule (lib/coll/one_shot.hpp) publishes each buffer once
// for every peer to read; and the size-based choice sends a small message
// the one way or the other by default. The rest of collectives_test runs
// under RR_ALGO=rd and RR_ALGO=oneshot too (tests/integration/meson.build:
// allreduce_rd_*, allreduce_oneshot_*), checking every dtype x op x count
// against the reference.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <string>
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

// Whether every rank runs on this host (by hostname, as fake_hosts.sh sets it).
bool all_ranks_on_this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  const uint64_t mine = std::hash<std::string>()(name);
  std::vector<uint64_t> all(static_cast<size_t>(g_size));
  EXPECT_EQ(rrAllGather(&mine, all.data(), 1, rrUint64, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  for (uint64_t h : all) {
    if (h != mine) return false;
  }
  return true;
}

bool env_is(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set && std::strcmp(set, value) == 0;
}

// Whether small calls take the one-shot schedule on the same-host board:
// every rank on this host, the board not turned off, and RR_ALGO not
// forcing recursive doubling.
bool board_expected() {
  static const bool on_host = all_ranks_on_this_host();
  return g_size > 1 && on_host && !env_is("RR_SAME_HOST", "ucx") && !env_is("RR_SHM_BOARD_BYTES", "0");
}

// Each message starts with the call's 32-byte operation header: the
// argument check travels with the data, and nothing else is sent.
constexpr uint64_t kHeaderBytes = 32;
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
  for (int p = 0; p < g_size; ++p) total += sent[static_cast<size_t>(p)];
  EXPECT_EQ(total, static_cast<uint64_t>(plan.messages_sent()) * (kHeaderBytes + count * sizeof(float)));
  // To its partners only.
  for (int p = 0; p < g_size; ++p) {
    bool partner = p == plan.sits_out_for() || p == plan.folds_in();
    for (int round = 0; round < plan.rounds(); ++round) partner = partner || p == plan.partner(round);
    if (!partner) {
      EXPECT_EQ(sent[static_cast<size_t>(p)], 0u) << "sent to rank " << p;
    }
  }
}

// Forced (allreduce_oneshot_*), a call larger than the board goes in
// publications of its capacity: each rank's buffer is published once, a
// header before each piece, and read once by every peer; nothing goes
// through UCX.
TEST(RecursiveDoubling, OneShotPublishesTheBufferOnceForEveryPeer) {
  if (!forced("oneshot") || !board_expected()) GTEST_SKIP() << "runs with RR_ALGO=oneshot on one host";
  const size_t count = 10007;  // a prime; 40 028 bytes: two publications of the default 32 KiB
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i * 7 + static_cast<size_t>(g_rank)) % 13);
  std::vector<uint64_t> received_before(static_cast<size_t>(g_size)), received_after(static_cast<size_t>(g_size));
  uint64_t sent = 0;
  for (int p = 0; p < g_size; ++p) EXPECT_EQ(rrCommGetPeerBytes(g_comm, p, &sent, &received_before[static_cast<size_t>(p)]), rrSuccess);
  const std::vector<uint64_t> sent_to = sent_during(g_comm, [&] {
    ASSERT_EQ(rrAllReduce(data.data(), data.data(), count, rrFloat32, rrSum, g_comm, nullptr), rrSuccess)
        << rrGetLastError(g_comm);
  });
  for (int p = 0; p < g_size; ++p) EXPECT_EQ(rrCommGetPeerBytes(g_comm, p, &sent, &received_after[static_cast<size_t>(p)]), rrSuccess);
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < g_size; ++r) expected += static_cast<float>((i * 7 + static_cast<size_t>(r)) % 13);
    ASSERT_EQ(data[i], expected) << "element " << i;
  }
  for (int p = 0; p < g_size; ++p) {
    const uint64_t pieces = (count * sizeof(float) + 32767) / 32768;  // RR_SHM_BOARD_BYTES's default
    const uint64_t expected = p == g_rank ? 0 : count * sizeof(float) + pieces * kHeaderBytes;
    EXPECT_EQ(sent_to[static_cast<size_t>(p)], expected) << "to rank " << p;
    EXPECT_EQ(received_after[static_cast<size_t>(p)] - received_before[static_cast<size_t>(p)], expected) << "from rank " << p;
  }
}

TEST(RecursiveDoubling, SmallMessagesTakeALatencyPathByDefault) {
  if (std::getenv("RR_ALGO") || g_size == 1) GTEST_SKIP() << "the default choice (RR_ALGO unset), on 2+ ranks";
  // 8 bytes: the ring would send 2(N-1) pieces of a 2-float buffer, some of
  // them empty. On one host the buffer is published once on the board,
  // behind its header, for each peer to read; elsewhere recursive doubling
  // sends it, behind its header, once per message of its plan.
  float data[2] = {1.0f, 2.0f};
  const std::vector<uint64_t> sent = sent_during(g_comm, [&] {
    ASSERT_EQ(rrAllReduce(data, data, 2, rrFloat32, rrSum, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  });
  EXPECT_EQ(data[0], static_cast<float>(g_size));
  EXPECT_EQ(data[1], 2.0f * static_cast<float>(g_size));
  uint64_t total = 0;
  for (int p = 0; p < g_size; ++p) {
    total += sent[static_cast<size_t>(p)];
    if (board_expected() && p != g_rank) {
      EXPECT_EQ(sent[static_cast<size_t>(p)], kHeaderBytes + 8) << "to rank " << p;
    }
  }
  if (!board_expected()) {
    EXPECT_EQ(total, static_cast<uint64_t>(rr::algo::RecursiveDoubling(g_size, g_rank).messages_sent()) * (kHeaderBytes + 8));
  }
}

TEST(RecursiveDoubling, BarrierIsAOneByteExchangeCarryingItsHeader) {
  const std::vector<uint64_t> sent = sent_during(g_comm, [&] {
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  });
  uint64_t total = 0;
  for (int p = 0; p < g_size; ++p) total += sent[static_cast<size_t>(p)];
  if (board_expected() && !forced("rd")) {
    EXPECT_EQ(total, static_cast<uint64_t>(g_size - 1) * (kHeaderBytes + 1)) << "one byte published for each peer";
  } else {
    EXPECT_EQ(total, static_cast<uint64_t>(rr::algo::RecursiveDoubling(g_size, g_rank).messages_sent()) *
                         (g_size > 1 ? kHeaderBytes + 1 : 0));
  }
}

// rrCommGetAlgorithm says what the calls above took (rr-bench labels its rows by it).
TEST(RecursiveDoubling, TheChoiceIsReported) {
  const char* algorithm = nullptr;
  // The ring's chunks go through shared-memory slot rings when every rank
  // is on this host, unless RR_SAME_HOST=ucx.
  const char* same_host = std::getenv("RR_SAME_HOST");
  const char* ring = all_ranks_on_this_host() && !(same_host && std::string(same_host) == "ucx") ? "ring (shared memory)" : "ring";
  // Small calls on one host take the board (one-shot), elsewhere recursive
  // doubling; RR_ALGO=oneshot without a board leaves the choice to the model.
  const char* latency = board_expected() ? "one-shot (shared memory)" : "recursive doubling";
  const char* small = forced("ring") ? ring : forced("rd") ? "recursive doubling" : forced("hd") ? "halving-doubling" : latency;
  const char* large = forced("ring") ? ring : forced("rd") ? "recursive doubling" : forced("hd") ? "halving-doubling"
                      : forced("oneshot") && board_expected() ? latency : ring;
  ASSERT_EQ(rrCommGetAlgorithm(g_comm, "allreduce", 2, rrFloat32, &algorithm), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_STREQ(algorithm, g_size == 1 ? "local copy" : small);
  ASSERT_EQ(rrCommGetAlgorithm(g_comm, "allreduce", size_t{64} << 20, rrFloat32, &algorithm), rrSuccess);
  EXPECT_STREQ(algorithm, g_size == 1 ? "local copy" : large);
  ASSERT_EQ(rrCommGetAlgorithm(g_comm, "barrier", 0, rrUint8, &algorithm), rrSuccess);
  EXPECT_STREQ(algorithm, g_size == 1 ? "local copy" : forced("rd") ? "recursive doubling" : latency);
  ASSERT_EQ(rrCommGetAlgorithm(g_comm, "allgather", 1000, rrFloat32, &algorithm), rrSuccess);
  EXPECT_STREQ(algorithm, g_size == 1 ? "local copy" : ring);
  ASSERT_EQ(rrCommGetAlgorithm(g_comm, "broadcast", size_t{16} << 20, rrFloat32, &algorithm), rrSuccess);
  EXPECT_STREQ(algorithm, g_size == 1 ? "local copy" : "chain");
  EXPECT_EQ(rrCommGetAlgorithm(g_comm, "allreduse", 2, rrFloat32, &algorithm), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("collective=\"allreduse\""), std::string::npos)
      << rrGetLastError(g_comm);
  EXPECT_EQ(rrCommGetAlgorithm(g_comm, "allreduce", 2, static_cast<rrDataType_t>(99), &algorithm),
            rrInvalidArgument);
}

// On the same-host board a rank waits only for the peers that read its
// publications: a rank whose ring neighbours are quick may run two
// publications ahead of a slow rank that is not its neighbour, and the slow
// rank must still see it as done (the chaos harness found the contrary: a
// hang). Rank 3 broadcasts small buffers (a tree: its sends do not wait for
// rank 0) after a one-shot call, which every rank reads; rank 0 is late for
// the second broadcast, by which time rank 3 has published the third.
TEST(Board, ARankAheadOfASlowNonNeighbourDoesNotStallIt) {
  if (g_size < 5) GTEST_SKIP() << "needs a rank that is not rank 0's ring neighbour: 5 ranks or more";
  float small[4] = {1, 2, 3, 4};
  ASSERT_EQ(rrAllReduce(small, small, 4, rrFloat32, rrSum, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  for (int call = 0; call < 3; ++call) {
    if (g_rank == 0 && call == 1) usleep(300000);
    float data[4] = {static_cast<float>(call), 0, 0, 0};
    ASSERT_EQ(rrBroadcast(data, data, 4, rrFloat32, 3, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    EXPECT_EQ(data[0], static_cast<float>(call));
  }
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
}

}  // namespace
