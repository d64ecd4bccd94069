// The communicator's operation queue: program order whoever runs an
// operation (its worker thread, or a thread that waits for it while nothing
// runs), each operation once, and every waiter answered.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
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
// wait late or never (the worker's), half of the operations a request's
// (a waiter's first, for the grace), point-to-point work overtaking them:
// every operation runs once, in the order issued, though they are waited
// in any order, and nothing runs beside anything else.
TEST(OperationQueue, OperationsRunInIssueOrderWhoeverWaits) {
  OperationQueue queue;
  std::mutex order_mutex;
  std::vector<int> order;
  std::mutex issue_mutex;  // the issue order is the order taken under it
  std::vector<int> issued;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int> running{0};  // operations and overtakers running now
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<AsyncOperation>> late;
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        std::shared_ptr<AsyncOperation> op;
        {
          std::lock_guard<std::mutex> lock(issue_mutex);
          // Half of them as a request's, which a waiter may take in its grace.
          op = queue.enqueue(
              [&, id] {
                if (running.fetch_add(1) != 0) overlapped = true;
                {
                  std::lock_guard<std::mutex> l(order_mutex);
                  order.push_back(id);
                }
                running.fetch_sub(1);
                return Status::Ok();
              },
              nullptr, /*waited=*/i % 2 == 0);
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
  // Point-to-point work overtaking the queue meanwhile, as rrWait on a
  // receive does: it never runs beside an operation, and takes nothing's place.
  std::thread overtaker([&] {
    while (!stop.load()) {
      ASSERT_TRUE(queue.run([&] {
                            if (running.fetch_add(1) != 0) overlapped = true;
                            running.fetch_sub(1);
                            return Status::Ok();
                          },
                          /*overtake=*/true)
                      .ok());
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  overtaker.join();
  EXPECT_EQ(order, issued);
  EXPECT_FALSE(overlapped.load());
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

// An operation queued on an idle communicator is a waiter's for the grace:
// the thread that waits for it at once runs it, never the worker (with a
// grace this long, every time).
TEST(OperationQueue, AnOperationWaitedForAtOnceRunsOnTheWaitersThread) {
  OperationQueue queue(std::chrono::seconds(30));
  for (int i = 0; i < 200; ++i) {
    std::thread::id ran_on;
    auto op = queue.enqueue(
        [&] {
          ran_on = std::this_thread::get_id();
          return Status::Ok();
        },
        nullptr, /*waited=*/true);
    std::this_thread::sleep_for(std::chrono::microseconds(i % 4 == 0 ? 200 : 0));  // the worker awake by now
    ASSERT_TRUE(queue.wait(*op).ok());
    ASSERT_EQ(ran_on, std::this_thread::get_id()) << "call " << i << " ran on the worker";
  }
}

// Nobody waits: the worker takes it once the grace is over, and the
// operations queued behind it at once.
TEST(OperationQueue, AnOperationNobodyWaitsForRunsOnTheWorkerAfterTheGrace) {
  OperationQueue queue(std::chrono::milliseconds(1));
  std::atomic<int> ran{0};
  std::thread::id first_on;
  std::vector<std::shared_ptr<AsyncOperation>> ops;
  for (int i = 0; i < 3; ++i) {
    ops.push_back(queue.enqueue(
        [&, i] {
          if (i == 0) first_on = std::this_thread::get_id();
          ++ran;
          return Status::Ok();
        },
        nullptr, /*waited=*/true));
  }
  // Tested, never waited for, within a generous bound (a liveness check).
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  Status status;
  while (!queue.test(*ops.back(), &status) && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ran.load(), 3);
  EXPECT_TRUE(status.ok());
  EXPECT_NE(first_on, std::this_thread::get_id());
}

// Polls `op` until it ran or `limit` passed; whether it ran.
bool ran_within(OperationQueue& queue, AsyncOperation& op, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  Status status;
  while (!queue.test(op, &status)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Waits (at most `limit`) for `flag`, set by an operation's body: unlike
// ran_within it never tests the operation, which would end its grace.
bool set_within(const std::atomic<bool>& flag, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!flag.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return flag.load();
}

// One that nobody may wait for (a callback completes it, or a stream-ordered
// call's host half) is the worker's at once, grace or not.
TEST(OperationQueue, AnOperationNotWaitedForIsTheWorkersAtOnce) {
  OperationQueue queue(std::chrono::seconds(30));
  std::atomic<bool> ran{false};
  auto op = queue.enqueue([&] {
    ran = true;
    return Status::Ok();
  });
  EXPECT_TRUE(set_within(ran, std::chrono::seconds(10))) << "it sat out the grace";
  EXPECT_TRUE(queue.wait(*op).ok());
}

// A thread that tests a call in its grace (rrTest) rather than wait for it
// will not run it: the worker takes it at once.
TEST(OperationQueue, ACallTestedInItsGraceIsTheWorkersAtOnce) {
  OperationQueue queue(std::chrono::seconds(30));
  std::atomic<bool> ran{false};
  auto op = queue.enqueue(
      [&] {
        ran = true;
        return Status::Ok();
      },
      nullptr, /*waited=*/true);
  Status status;
  (void)queue.test(*op, &status);
  EXPECT_TRUE(set_within(ran, std::chrono::seconds(10))) << "it sat out the grace after a test";
  EXPECT_TRUE(queue.wait(*op).ok());
}

// A thread that waits for an operation queued behind one in its grace ends
// that grace: the first runs now, not when its own caller comes.
TEST(OperationQueue, AWaiterBehindAGraceEndsIt) {
  OperationQueue queue(std::chrono::seconds(30));
  auto first = queue.enqueue([] { return Status::Ok(); }, nullptr, /*waited=*/true);
  auto second = queue.enqueue([] { return Status::Ok(); }, nullptr, /*waited=*/true);
  std::thread waiter([&] { EXPECT_TRUE(queue.wait(*second).ok()); });
  const bool ran = ran_within(queue, *second, std::chrono::seconds(10));
  waiter.join();  // within the grace's 30 s at worst
  EXPECT_TRUE(ran) << "the waiter behind the first one waited out its grace";
  Status status;
  EXPECT_TRUE(queue.test(*first, &status));
}

// The scheduling class of thread `tid` of this process (field 41 of its
// /proc stat line), or -1.
int policy_of(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(in, line);
  const size_t end = line.rfind(')');  // the name may hold spaces
  if (end == std::string::npos) return -1;
  std::istringstream fields(line.substr(end + 2));
  std::string field;
  for (int i = 3; i <= 41 && fields >> field; ++i) {
    if (i == 41) return std::stoi(field);
  }
  return -1;
}

// Whether a thread here may move itself to `policy` (a sandbox may forbid
// sched_setscheduler; the queue then leaves its worker's class alone).
bool may_take(int policy) {
  bool ok = false;
  std::thread probe([&] {
    sched_param param{};
    ok = pthread_setschedparam(pthread_self(), policy, &param) == 0;
  });
  probe.join();
  return ok;
}

// The worker runs an operation in the normal class and waits for the next
// in SCHED_BATCH (whose wake-up preempts no running thread).
// A thread that waits for the last of a burst the worker runs sleeps through
// the others' ends: it is woken when its own is next or done, not by each
// one (counted as this thread's voluntary context switches).
TEST(OperationQueue, AWaiterSleepsThroughTheEndsOfOperationsBeforeItsOwn) {
  OperationQueue queue;
  constexpr int kBurst = 40;
  std::atomic<bool> go{false};
  std::vector<std::shared_ptr<AsyncOperation>> ops;
  for (int i = 0; i < kBurst; ++i) {
    ops.push_back(queue.enqueue([&go] {
      while (!go.load()) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(300));  // long enough to sleep between ends
      return Status::Ok();
    }));
  }
  auto switches = [] {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_nvcsw;
  };
  const long before = switches();
  std::thread opener([&go] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the waiter below is asleep by then
    go = true;
  });
  EXPECT_TRUE(queue.wait(*ops.back()).ok());
  const long woken = switches() - before;
  opener.join();
  EXPECT_LT(woken, kBurst / 4) << "the waiter was woken at the end of operations it does not wait for";
}

TEST(OperationQueue, TheWorkerRunsInTheNormalClassAndWaitsInBatch) {
  if (!may_take(SCHED_BATCH)) GTEST_SKIP() << "this sandbox forbids changing a thread's scheduling class";
  OperationQueue queue;
  std::atomic<int> ran_in{-1};
  std::atomic<pid_t> worker{0};
  auto op = queue.enqueue([&] {
    ran_in = sched_getscheduler(0);
    worker = static_cast<pid_t>(syscall(SYS_gettid));
    return Status::Ok();
  });
  ASSERT_TRUE(ran_within(queue, *op, std::chrono::seconds(10)));
  EXPECT_EQ(ran_in.load(), SCHED_OTHER);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (policy_of(worker.load()) != SCHED_BATCH && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(policy_of(worker.load()), SCHED_BATCH);
}

// A call nobody waits for is the worker's at once, and so is its wake-up:
// enqueue raises the sleeping worker out of SCHED_BATCH before it wakes it
// (a batch wake-up waits for a free core). A call a waiter may take (in its
// grace) leaves the worker where it waits.
TEST(OperationQueue, ACallNobodyWaitsForRaisesTheWorkerBeforeItsWakeUp) {
  if (!may_take(SCHED_BATCH)) GTEST_SKIP() << "this sandbox forbids changing a thread's scheduling class";
  OperationQueue queue(std::chrono::seconds(30));
  std::atomic<pid_t> worker{0};
  auto first = queue.enqueue([&] {
    worker = static_cast<pid_t>(syscall(SYS_gettid));
    return Status::Ok();
  });
  ASSERT_TRUE(ran_within(queue, *first, std::chrono::seconds(10)));
  auto asleep_in_batch = [&] {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (policy_of(worker.load()) != SCHED_BATCH && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return policy_of(worker.load()) == SCHED_BATCH;
  };
  ASSERT_TRUE(asleep_in_batch());
  // A request's call, in its grace: the worker stays in SCHED_BATCH.
  auto waited = queue.enqueue([] { return Status::Ok(); }, nullptr, /*waited=*/true);
  EXPECT_EQ(policy_of(worker.load()), SCHED_BATCH) << "a call its waiter may take raised the worker";
  EXPECT_TRUE(queue.wait(*waited).ok());
  ASSERT_TRUE(asleep_in_batch());
  std::atomic<bool> go{false};
  auto nobodys = queue.enqueue([&] {
    while (!go.load()) std::this_thread::yield();
    return Status::Ok();
  });
  EXPECT_EQ(policy_of(worker.load()), SCHED_OTHER) << "the worker was woken in SCHED_BATCH";
  go = true;
  EXPECT_TRUE(ran_within(queue, *nobodys, std::chrono::seconds(10)));
}

// A worker started by a thread in another class (here SCHED_IDLE, which an
// unprivileged thread may take) keeps it: the class is the program's choice.
TEST(OperationQueue, AWorkerStartedInAnotherClassKeepsIt) {
  if (!may_take(SCHED_IDLE)) GTEST_SKIP() << "this sandbox forbids changing a thread's scheduling class";
  OperationQueue queue;
  std::atomic<int> ran_in{-1};
  std::shared_ptr<AsyncOperation> op;
  std::thread starter([&] {
    sched_param param{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_IDLE, &param), 0);
    op = queue.enqueue([&] {
      ran_in = sched_getscheduler(0);
      return Status::Ok();
    });
  });
  starter.join();
  ASSERT_TRUE(op);
  ASSERT_TRUE(ran_within(queue, *op, std::chrono::seconds(10)));
  EXPECT_EQ(ran_in.load(), SCHED_IDLE);
}

}  // namespace
}  // namespace rr
