// The communicator's operation queue: program order whoever runs an
// operation (its worker thread, or a thread that waits for it while nothing
// runs), each operation once, and every waiter answered.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/operation_queue.hpp"

namespace rr {
namespace {

TEST(OperationQueue, AWaitedOperationRunsOnceWithItsResult) {
  OperationQueue queue;
  std::atomic<int> runs{0};
  auto ok = queue.enqueue([&] {
    ++runs;
    return Status::Ok();
  });
  auto failed = queue.enqueue([&] {
    ++runs;
    return InvalidArgument("the second one");
  });
  EXPECT_TRUE(queue.wait(*ok).ok());
  const Status s = queue.wait(*failed);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "the second one");
  EXPECT_TRUE(queue.wait(*failed).code() == Code::kInvalidArgument);  // waited again: the same answer
  EXPECT_EQ(runs.load(), 2);
}

// Threads issue and wait at once (the backend's blocking calls), others
// wait late or never (the worker's): every operation runs once, in the
// order issued, though they are waited in any order.
TEST(OperationQueue, OperationsRunInIssueOrderWhoeverWaits) {
  OperationQueue queue;
  std::mutex order_mutex;
  std::vector<int> order;
  std::mutex issue_mutex;  // the issue order is the order taken under it
  std::vector<int> issued;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<AsyncOperation>> late;
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        std::shared_ptr<AsyncOperation> op;
        {
          std::lock_guard<std::mutex> lock(issue_mutex);
          op = queue.enqueue([&, id] {
            std::lock_guard<std::mutex> l(order_mutex);
            order.push_back(id);
            return Status::Ok();
          });
          issued.push_back(id);
        }
        if (t % 2 == 0 || i % 7 == 0) {
          ASSERT_TRUE(queue.wait(*op).ok());
        } else {
          late.push_back(std::move(op));
        }
      }
      for (auto it = late.rbegin(); it != late.rend(); ++it) ASSERT_TRUE(queue.wait(**it).ok());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(order, issued);
}

// A blocking run() between queued operations keeps its place too.
TEST(OperationQueue, ABlockingRunWaitsForTheQueuedOnesBeforeIt) {
  OperationQueue queue;
  std::vector<int> order;
  std::atomic<bool> release{false};
  auto first = queue.enqueue([&] {
    while (!release.load()) std::this_thread::yield();
    order.push_back(1);
    return Status::Ok();
  });
  auto second = queue.enqueue([&] {
    order.push_back(2);
    return Status::Ok();
  });
  std::thread waiter([&] { EXPECT_TRUE(queue.wait(*second).ok()); });
  std::thread blocking([&] { EXPECT_TRUE(queue.run([&] {
                                                 order.push_back(3);
                                                 return Status::Ok();
                                               }).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release.store(true);
  waiter.join();
  blocking.join();
  EXPECT_TRUE(queue.wait(*first).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace rr
