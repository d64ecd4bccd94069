// A call that returned success has delivered its bytes, whatever the caller
// does next. Run on 2 ranks over UCX's TCP lane with small socket buffers
// (tests/integration/meson.build: RR_SAME_HOST=ucx UCX_TLS=tcp,self
// UCX_TCP_SNDBUF=64k UCX_TCP_RCVBUF=64k): a send below UCX's zero-copy
// threshold is copied, reported done, and what the socket did not take
// waits in user space for the next progress of that communicator. Each test
// makes the sender's next step something that does not progress it: a call
// on another communicator, or an idle pause longer than the receiver's
// timeout. Before the idle-progress thread (lib/comm/idle_progress.hpp)
// each of them hung into the timeout.

#include <dirent.h>
#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

rrComm_t g_world = nullptr;  // A: where the bytes are sent
rrComm_t g_other = nullptr;  // B: rrCommSplit(A, 0, rank), the call after (RR_TIMEOUT_MS, outlasting the pauses)
rrComm_t g_short = nullptr;  // A's ranks with a 1000 ms timeout: where the idle tests send
int g_rank = -1;
int g_size = 0;
constexpr int kShortTimeoutMs = 1000;
// The idle tests' pause: longer than the receiver's timeout on g_short, so a
// sender whose held bytes wait for its next call makes the receiver fail.
constexpr int kPauseMs = kShortTimeoutMs + 1000;

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

#define RR_OK(call, comm) ASSERT_EQ((call), rrSuccess) << #call << ": " << rrGetLastError(comm)

// Every element says who sent it and where it sits.
std::vector<int32_t> pattern(int sender, size_t count, int salt) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(sender * 1000003 + salt * 7919 + static_cast<int>(i));
  return v;
}

class HeldBytes : public ::testing::TestWithParam<size_t> {};

// The reproduction: rank 0 sends, then enters a barrier on B; rank
// 1 takes 200 ms before it receives on A, then joins the barrier.
TEST_P(HeldBytes, SendThenACallOnAnotherCommunicator) {
  const size_t count = GetParam() / sizeof(int32_t);
  if (g_rank == 0) {
    const std::vector<int32_t> out = pattern(0, count, 1);
    RR_OK(rrSend(out.data(), count, rrInt32, 1, g_world, nullptr), g_world);
  } else if (g_rank == 1) {
    sleep_ms(200);
    std::vector<int32_t> in(count, -1);
    RR_OK(rrRecv(in.data(), count, rrInt32, 0, g_world, nullptr), g_world);
    EXPECT_EQ(in, pattern(0, count, 1));
  }
  RR_OK(rrBarrier(g_other, nullptr), g_other);
}

// The same with a pause: the sender idles for longer than the receiver's
// timeout before its next call, on the same communicator.
TEST_P(HeldBytes, SendThenAnIdlePause) {
  const size_t count = GetParam() / sizeof(int32_t);
  if (g_rank == 0) {
    const std::vector<int32_t> out = pattern(0, count, 2);
    RR_OK(rrSend(out.data(), count, rrInt32, 1, g_short, nullptr), g_short);
    sleep_ms(kPauseMs);
  } else if (g_rank == 1) {
    sleep_ms(200);
    std::vector<int32_t> in(count, -1);
    RR_OK(rrRecv(in.data(), count, rrInt32, 0, g_short, nullptr), g_short);
    EXPECT_EQ(in, pattern(0, count, 2));
  }
  RR_OK(rrBarrier(g_other, nullptr), g_other);  // its timeout outlasts the pause
}

// Non-blocking: rrWait of the send returns once its bytes have left.
TEST_P(HeldBytes, IsendWaitThenACallOnAnotherCommunicator) {
  const size_t count = GetParam() / sizeof(int32_t);
  if (g_rank == 0) {
    const std::vector<int32_t> out = pattern(0, count, 3);
    rrRequest_t request = nullptr;
    RR_OK(rrIsend(out.data(), count, rrInt32, 1, g_world, &request), g_world);
    RR_OK(rrWait(request), g_world);
  } else if (g_rank == 1) {
    sleep_ms(200);
    std::vector<int32_t> in(count, -1);
    RR_OK(rrRecv(in.data(), count, rrInt32, 0, g_world, nullptr), g_world);
    EXPECT_EQ(in, pattern(0, count, 3));
  }
  RR_OK(rrBarrier(g_other, nullptr), g_other);
}

// A grouped send (rrGroupEnd returns once it has left).
TEST_P(HeldBytes, GroupedSendThenAnIdlePause) {
  const size_t count = GetParam() / sizeof(int32_t);
  if (g_rank == 0) {
    const std::vector<int32_t> out = pattern(0, count, 4);
    RR_OK(rrGroupStart(), g_short);
    RR_OK(rrSend(out.data(), count, rrInt32, 1, g_short, nullptr), g_short);
    RR_OK(rrGroupEnd(), g_short);
    sleep_ms(kPauseMs);
  } else if (g_rank == 1) {
    sleep_ms(200);
    std::vector<int32_t> in(count, -1);
    RR_OK(rrRecv(in.data(), count, rrInt32, 0, g_short, nullptr), g_short);
    EXPECT_EQ(in, pattern(0, count, 4));
  }
  RR_OK(rrBarrier(g_other, nullptr), g_other);
}

INSTANTIATE_TEST_SUITE_P(Sizes, HeldBytes, ::testing::Values(200 << 10, 384 << 10, 500 << 10),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::to_string(info.param >> 10) + "KiB";
                         });

// 1 MiB per rank: with 384 KiB chunks (RR_CHUNK_BYTES) the ring's and the
// chain's sends are copied ones; all-to-all's blocks are sent whole, so
// they are cut to 384 KiB.
constexpr size_t kCollectiveCount = (1 << 20) / sizeof(int32_t);
constexpr size_t kBlockCount = (384 << 10) / sizeof(int32_t);

// Collectives end the same way: each rank's last sends may be held when it
// returns. Rank 1 pauses before each call, so rank 0 finishes first and
// goes on to B (or idles) while rank 1 still needs its last bytes.
class HeldCollective : public ::testing::TestWithParam<const char*> {
 protected:
  // Runs collective GetParam() on `comm` over `count` int32 per rank and checks it.
  void run(rrComm_t comm, size_t count, int salt) {
    const std::string which = GetParam();
    const size_t n = static_cast<size_t>(g_size);
    std::vector<int32_t> mine = pattern(g_rank, count, salt);
    if (which == "allreduce") {
      std::vector<int32_t> out(count);
      RR_OK(rrAllReduce(mine.data(), out.data(), count, rrInt32, rrSum, comm, nullptr), comm);
      std::vector<int32_t> want(count, 0);
      for (int r = 0; r < g_size; ++r) {
        const std::vector<int32_t> theirs = pattern(r, count, salt);
        for (size_t i = 0; i < count; ++i) want[i] += theirs[i];
      }
      EXPECT_EQ(out, want);
    } else if (which == "allgather") {
      std::vector<int32_t> out(count * n);
      RR_OK(rrAllGather(mine.data(), out.data(), count, rrInt32, comm, nullptr), comm);
      for (int r = 0; r < g_size; ++r) {
        const std::vector<int32_t> theirs = pattern(r, count, salt);
        EXPECT_TRUE(std::equal(theirs.begin(), theirs.end(), out.begin() + static_cast<ptrdiff_t>(r * count)))
            << "rank " << r << "'s block";
      }
    } else if (which == "broadcast") {
      std::vector<int32_t> buf = g_rank == 0 ? mine : std::vector<int32_t>(count, -1);
      RR_OK(rrBroadcast(buf.data(), buf.data(), count, rrInt32, 0, comm, nullptr), comm);
      EXPECT_EQ(buf, pattern(0, count, salt));
    } else if (which == "alltoall") {
      count = kBlockCount;  // a copied send per block, not the zero-copy path
      std::vector<int32_t> in = pattern(g_rank, count * n, salt), out(count * n);
      RR_OK(rrAllToAll(in.data(), out.data(), count, rrInt32, comm, nullptr), comm);
      for (int r = 0; r < g_size; ++r) {
        const std::vector<int32_t> theirs = pattern(r, count * n, salt);
        const auto block = theirs.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(g_rank) * count);
        EXPECT_TRUE(std::equal(block, block + static_cast<ptrdiff_t>(count),
                               out.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * count)))
            << "block from rank " << r;
      }
    } else {
      FAIL() << "unknown collective " << which;
    }
  }
};


TEST_P(HeldCollective, ThenACallOnAnotherCommunicator) {
  for (int round = 0; round < 3; ++round) {
    if (g_rank == 1) sleep_ms(100);
    run(g_world, kCollectiveCount, round);
    RR_OK(rrBarrier(g_other, nullptr), g_other);
  }
}

// Whichever rank finishes first idles with its last bytes held.
TEST_P(HeldCollective, ThenAnIdlePause) {
  if (g_rank == 1) sleep_ms(100);
  run(g_short, kCollectiveCount, 7);
  sleep_ms(kPauseMs);
  RR_OK(rrBarrier(g_other, nullptr), g_other);
}

INSTANTIATE_TEST_SUITE_P(Collectives, HeldCollective,
                         ::testing::Values("allreduce", "allgather", "broadcast", "alltoall"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

int open_descriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// Between calls the idle-progress thread sees a peer that destroyed its
// communicator first (UCX reports its endpoint failed): that is a peer
// that left after its last call, not a loss, so this rank's own destroy
// still tears the transport down. (Left as it is, as after a failure, each
// communicator kept its UCX worker's descriptors and shared memory: the
// cross-host fuzzer's descriptors grew by 12 a time.)
TEST(HeldBytes, APeerThatDestroyedFirstLeavesNothingBehind) {
  const int before = open_descriptors();
  for (int round = 0; round < 10; ++round) {
    rrComm_t sub = nullptr;
    RR_OK(rrCommSplit(g_world, 0, g_rank, &sub, nullptr), g_world);
    std::vector<int32_t> data = pattern(g_rank, 1000, round);
    RR_OK(rrAllReduce(data.data(), data.data(), data.size(), rrInt32, rrSum, sub, nullptr), sub);
    if (g_rank == 1) sleep_ms(50);  // rank 0's endpoints close meanwhile, and this rank's thread sees it
    RR_OK(rrCommDestroy(sub), g_world);
  }
  EXPECT_LE(open_descriptors(), before);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (rrCommInitFromEnv(&g_world) != rrSuccess) {
    std::fprintf(stderr, "rrCommInitFromEnv: %s\n", rrGetLastError(nullptr));
    return 1;
  }
  rrCommUserRank(g_world, &g_rank);
  rrCommCount(g_world, &g_size);
  rrConfig_t short_timeout = RR_CONFIG_INITIALIZER;
  short_timeout.timeout_ms = kShortTimeoutMs;
  if (rrCommSplit(g_world, 0, g_rank, &g_other, nullptr) != rrSuccess ||
      rrCommSplit(g_world, 0, g_rank, &g_short, &short_timeout) != rrSuccess) {
    std::fprintf(stderr, "rrCommSplit: %s\n", rrGetLastError(g_world));
    return 1;
  }
  if (g_size != 2) {
    std::fprintf(stderr, "held_bytes_test runs on 2 ranks, not %d\n", g_size);
    return 1;
  }
  const int failed = RUN_ALL_TESTS();
  rrCommDestroy(g_short);
  rrCommDestroy(g_other);
  rrCommDestroy(g_world);
  return failed;
}
