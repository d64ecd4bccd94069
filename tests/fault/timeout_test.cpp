// rrCommSetTimeout and rrCommSetCompletionCallback with real processes:
// rank 1 never comes to the call under test, so rank 0's only way out is its
// timeout or an abort. The timeout set after init bounds the calls after it
// (within 0.5 s), an Async call keeps the timeout in force when it was
// called even when it runs after another was set, and a timeout below 1 ms
// is refused naming the argument. An Async call under a completion callback
// hears its timeout through it, and so do the calls after it (the
// communicator is broken), and an abort ends a pending one through it.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "world.hpp"

namespace {

using namespace fault_world;

using Timeouts = NoShmLeft;

constexpr int kInitTimeoutMs = 60000;

TEST_F(Timeouts, SetTimeoutBoundsTheCallsAfterIt) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 1) {
      for (;;) pause();  // never calls: rank 0 can only time out
    }
    int timeout = 0;
    check(rrCommGetTimeout(comm, &timeout) == rrSuccess && timeout == kInitTimeoutMs,
          "rrCommGetTimeout before: " + std::to_string(timeout), out);
    check(rrCommSetTimeout(comm, 0) == rrInvalidArgument &&
              std::string(rrGetLastError(comm)).find("rrCommSetTimeout: timeout_ms=0") != std::string::npos,
          std::string("rrCommSetTimeout(0): ") + rrGetLastError(comm), out);
    check(rrCommSetTimeout(comm, 1000) == rrSuccess, "rrCommSetTimeout(1000) failed", out);
    check(rrCommGetTimeout(comm, &timeout) == rrSuccess && timeout == 1000,
          "rrCommGetTimeout after: " + std::to_string(timeout), out);
    if (out->result == -2) return;
    std::vector<float> data(1000, 1.0f);
    const auto t0 = Clock::now();
    out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  EXPECT_GT(o.seconds, 0.9) << o.error;
  EXPECT_LT(o.seconds, 1.5) << "within 0.5 s of the 1 s set, not the 60 s of init: " << o.error;
}

TEST_F(Timeouts, AnAsyncCallKeepsTheTimeoutInForceWhenItWasCalled) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> first(1000, 1.0f), second(1000, 1.0f);
    if (rank == 1) {
      // Joins rank 0's first call half a second late, and nothing after it.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (rrAllReduce(first.data(), first.data(), first.size(), rrFloat32, rrSum, comm, nullptr) != rrSuccess) _exit(4);
      for (;;) pause();
    }
    // A blocking call on another thread holds the communicator until rank 1
    // comes, so the Async call below runs only after the timeout changed.
    rrResult_t first_result = rrInternalError;
    std::thread holder([&] {
      first_result = rrAllReduce(first.data(), first.data(), first.size(), rrFloat32, rrSum, comm, nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    check(rrCommSetTimeout(comm, 1000) == rrSuccess, "rrCommSetTimeout(1000) failed", out);
    rrRequest_t request = nullptr;
    const auto t0 = Clock::now();
    check(rrAllReduceAsync(second.data(), second.data(), second.size(), rrFloat32, rrSum, comm, &request) ==
              rrSuccess,
          std::string("rrAllReduceAsync: ") + rrGetLastError(comm), out);
    check(rrCommSetTimeout(comm, kInitTimeoutMs) == rrSuccess, "rrCommSetTimeout(60000) failed", out);
    holder.join();
    check(first_result == rrSuccess, std::string("the first call: ") + rrGetLastError(comm), out);
    if (out->result == -2) return;
    out->result = rrWait(request);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  // About 0.4 s behind the first call, then its own 1 s.
  EXPECT_LT(o.seconds, 2.5) << "the Async call took the timeout set after it was called: " << o.error;
}

// What a completion callback heard.
struct Heard {
  std::mutex mutex;
  std::condition_variable changed;
  int calls = 0;
  rrResult_t result = rrSuccess;
  std::string message;

  static void callback(rrRequest_t, rrResult_t result, const char* message, void* user_data) {
    Heard* heard = static_cast<Heard*>(user_data);
    std::lock_guard<std::mutex> lock(heard->mutex);
    ++heard->calls;
    heard->result = result;
    heard->message = message;
    heard->changed.notify_all();
  }
  // Waits (at most 30 s) for `n` calls; writes the last one into *out.
  void wait_for(int n, Outcome* out) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!changed.wait_for(lock, std::chrono::seconds(30), [&] { return calls >= n; })) {
      check(false, "the callback did not come: " + std::to_string(calls) + " of " + std::to_string(n), out);
      return;
    }
    check(calls == n, "the callback came " + std::to_string(calls) + " times, not " + std::to_string(n), out);
    if (out->result == -2) return;
    out->result = result;
    std::snprintf(out->error, sizeof(out->error), "%s", message.c_str());
  }
};

TEST_F(Timeouts, ACompletionCallbackHearsATimeoutAndTheCallsAfterIt) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 1) {
      for (;;) pause();
    }
    Heard heard;
    std::vector<float> data(1000, 1.0f);
    check(rrCommSetTimeout(comm, 1000) == rrSuccess, "rrCommSetTimeout", out);
    check(rrCommSetCompletionCallback(comm, Heard::callback, &heard) == rrSuccess, "rrCommSetCompletionCallback", out);
    rrRequest_t request = nullptr;
    const auto t0 = Clock::now();
    check(rrAllReduceAsync(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, &request) == rrSuccess,
          std::string("rrAllReduceAsync: ") + rrGetLastError(comm), out);
    heard.wait_for(1, out);
    out->seconds = seconds_since(t0);
    if (out->result != rrTimeout || std::string(out->error).find("timed out") == std::string::npos) {
      check(false, "the first call: result " + std::to_string(out->result) + ": " + out->error, out);
      return;
    }
    // The communicator is broken: the next call hears it through the callback too.
    check(rrAllReduceAsync(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, &request) == rrSuccess,
          std::string("the second rrAllReduceAsync: ") + rrGetLastError(comm), out);
    heard.wait_for(2, out);
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrInvalidUsage) << o.error;
  EXPECT_NE(std::string(o.error).find("unusable after an earlier failure"), std::string::npos) << o.error;
  EXPECT_LT(o.seconds, 1.5) << "the first call's timeout came through the callback late: " << o.error;
}

TEST_F(Timeouts, AnAbortEndsAPendingCallThroughItsCallback) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 1) {
      for (;;) pause();
    }
    Heard heard;
    std::vector<float> data(1000, 1.0f);
    check(rrCommSetCompletionCallback(comm, Heard::callback, &heard) == rrSuccess, "rrCommSetCompletionCallback", out);
    rrRequest_t request = nullptr;
    check(rrAllReduceAsync(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, &request) == rrSuccess,
          std::string("rrAllReduceAsync: ") + rrGetLastError(comm), out);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto t0 = Clock::now();
    check(rrCommAbort(comm) == rrSuccess, std::string("rrCommAbort: ") + rrGetLastError(nullptr), out);
    heard.wait_for(1, out);
    out->seconds = seconds_since(t0);
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrInvalidUsage) << o.error;
  EXPECT_NE(std::string(o.error).find("aborted"), std::string::npos) << o.error;
  EXPECT_LT(o.seconds, 1.5) << o.error;
}

}  // namespace
