// rrCommSetCompletionCallback: Async collectives made under a callback
// complete through it, once each, with their results right (against values
// every rank can compute), and their requests are the engine's to release;
// a callback set later does not reach calls made before it, and with none
// set the requests are waited as usual.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives_env.hpp"

namespace {

using namespace collectives_env;

// What the callbacks saw, by the user_data they were given (an index).
struct Seen {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> calls;            // callbacks per index
  std::vector<rrResult_t> results;
  std::vector<std::string> messages;
  std::vector<rrRequest_t> requests;
  int total = 0;

  explicit Seen(size_t n) : calls(n, 0), results(n, rrInternalError), messages(n), requests(n, nullptr) {}

  // Waits until `n` callbacks came (at most 60 s).
  bool wait_for(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(60), [&] { return total >= n; });
  }
};

struct Tag {
  Seen* seen;
  size_t index;
};

void on_done(rrRequest_t request, rrResult_t result, const char* message, void* user_data) {
  const Tag* tag = static_cast<const Tag*>(user_data);
  std::lock_guard<std::mutex> lock(tag->seen->mutex);
  ++tag->seen->calls[tag->index];
  tag->seen->results[tag->index] = result;
  tag->seen->messages[tag->index] = message;
  tag->seen->requests[tag->index] = request;
  ++tag->seen->total;
  tag->seen->changed.notify_all();
}

TEST(CompletionCallback, EveryAsyncCollectiveCompletesThroughItOnce) {
  const size_t n = static_cast<size_t>(g_size);
  constexpr size_t kCount = 1000;
  constexpr int kCalls = 6;
  Seen seen(kCalls);
  std::vector<Tag> tags;
  for (size_t i = 0; i < kCalls; ++i) tags.push_back({&seen, i});
  // allreduce (sum of ranks + i), broadcast from the last rank, all-gather,
  // reduce-scatter, barrier, and an allreduce of 0 elements.
  std::vector<int64_t> sum(kCount), bcast(kCount), mine(3), all(3 * n), blocks(2 * n), block(2);
  for (size_t i = 0; i < kCount; ++i) {
    sum[i] = g_rank + static_cast<int64_t>(i);
    bcast[i] = g_rank == g_size - 1 ? static_cast<int64_t>(i) * 7 : -1;
  }
  for (size_t i = 0; i < 3; ++i) mine[i] = g_rank * 10 + static_cast<int64_t>(i);
  for (size_t i = 0; i < 2 * n; ++i) blocks[i] = static_cast<int64_t>(i);
  std::vector<rrRequest_t> requests(kCalls, nullptr);
  auto with = [&](size_t i) { ASSERT_EQ(rrCommSetCompletionCallback(g_comm, on_done, &tags[i]), rrSuccess); };
  with(0);
  ASSERT_EQ(rrAllReduceAsync(sum.data(), sum.data(), kCount, rrInt64, rrSum, g_comm, &requests[0]), rrSuccess)
      << rrGetLastError(g_comm);
  with(1);
  ASSERT_EQ(rrBroadcastAsync(bcast.data(), bcast.data(), kCount, rrInt64, g_size - 1, g_comm, &requests[1]),
            rrSuccess);
  with(2);
  ASSERT_EQ(rrAllGatherAsync(mine.data(), all.data(), 3, rrInt64, g_comm, &requests[2]), rrSuccess);
  with(3);
  ASSERT_EQ(rrReduceScatterAsync(blocks.data(), block.data(), 2, rrInt64, rrSum, g_comm, &requests[3]), rrSuccess);
  with(4);
  ASSERT_EQ(rrBarrierAsync(g_comm, &requests[4]), rrSuccess);
  with(5);
  ASSERT_EQ(rrAllReduceAsync(sum.data(), sum.data(), 0, rrInt64, rrSum, g_comm, &requests[5]), rrSuccess);
  ASSERT_EQ(rrCommSetCompletionCallback(g_comm, nullptr, nullptr), rrSuccess);
  ASSERT_TRUE(seen.wait_for(kCalls)) << "callbacks: " << seen.total << " of " << kCalls;
  {
    std::lock_guard<std::mutex> lock(seen.mutex);
    for (size_t i = 0; i < kCalls; ++i) {
      EXPECT_EQ(seen.calls[i], 1) << "call " << i;
      EXPECT_EQ(seen.results[i], rrSuccess) << "call " << i << ": " << seen.messages[i];
      EXPECT_EQ(seen.messages[i], "") << "call " << i;
      EXPECT_EQ(seen.requests[i], requests[i]) << "call " << i << ": the callback names its request";
    }
  }
  const int64_t ranks = g_size;
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(sum[i], ranks * (ranks - 1) / 2 + ranks * static_cast<int64_t>(i)) << "element " << i;
    ASSERT_EQ(bcast[i], static_cast<int64_t>(i) * 7) << "element " << i;
  }
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < 3; ++i) ASSERT_EQ(all[3 * r + i], static_cast<int64_t>(r * 10 + i));
  }
  for (size_t i = 0; i < 2; ++i) ASSERT_EQ(block[i], ranks * static_cast<int64_t>(2 * g_rank + i));
  // The engine released them: a wait is refused, as on any finished request.
  for (size_t i = 0; i < kCalls; ++i) {
    EXPECT_EQ(rrWait(requests[i]), rrInvalidUsage) << "call " << i;
    EXPECT_NE(std::string(rrGetLastError(nullptr)).find("not in flight"), std::string::npos) << rrGetLastError(nullptr);
  }
  // Still healthy, and destroyable: nothing of the calls is left in flight.
  EXPECT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
}

TEST(CompletionCallback, ACallMadeBeforeItWasSetIsWaitedAsUsual) {
  Seen seen(1);
  Tag tag{&seen, 0};
  std::vector<float> x(100, 1.0f);
  rrRequest_t before = nullptr;
  ASSERT_EQ(rrAllReduceAsync(x.data(), x.data(), x.size(), rrFloat32, rrSum, g_comm, &before), rrSuccess);
  ASSERT_EQ(rrCommSetCompletionCallback(g_comm, on_done, &tag), rrSuccess);
  rrRequest_t during = nullptr;
  std::vector<float> y(100, 2.0f);
  ASSERT_EQ(rrAllReduceAsync(y.data(), y.data(), y.size(), rrFloat32, rrMax, g_comm, &during), rrSuccess);
  ASSERT_EQ(rrCommSetCompletionCallback(g_comm, nullptr, &tag), rrSuccess);
  ASSERT_EQ(rrWait(before), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(x[99], static_cast<float>(g_size));
  ASSERT_TRUE(seen.wait_for(1));
  EXPECT_EQ(y[99], 2.0f);
  std::lock_guard<std::mutex> lock(seen.mutex);
  EXPECT_EQ(seen.calls[0], 1);
  EXPECT_EQ(seen.requests[0], during);
}

}  // namespace
