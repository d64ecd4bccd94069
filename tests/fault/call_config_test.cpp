// The per-call config (rrCollConfig_t) with real processes: a call's own
// timeout bounds that call and no other, and wins over the communicator's
// whatever is set meanwhile; an allreduce's own algorithm is the one it
// takes (ranks passing different ones fail naming them, and each gives the
// right sums); a config not made from the initializer, a timeout below
// 1 ms or an unknown algorithm, or an algorithm on another collective, is
// refused naming it before anything is sent; and every Config form,
// blocking and Async, runs its own collective.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "world.hpp"

namespace {

using namespace fault_world;

using CallConfig = NoShmLeft;

constexpr int kInitTimeoutMs = 60000;

rrCollConfig_t with_timeout(int ms) {
  rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
  config.timeout_ms = ms;
  return config;
}

rrCollConfig_t with_algorithm(const char* algorithm) {
  rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
  config.algorithm = algorithm;
  return config;
}

// Rank 1 never comes: a blocking call under a 1 s config times out in about
// 1 s on a communicator whose own timeout is 60 s, which stays 60 s.
TEST_F(CallConfig, ItsTimeoutBoundsABlockingCallAndNoOther) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 1) {
      for (;;) pause();
    }
    std::vector<float> data(1000, 1.0f);
    const rrCollConfig_t config = with_timeout(1000);
    const auto t0 = Clock::now();
    out->result = rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr, &config);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
    int timeout = 0;
    if (rrCommGetTimeout(comm, &timeout) != rrSuccess || timeout != kInitTimeoutMs) {
      std::snprintf(out->error, sizeof(out->error), "the communicator's timeout became %d", timeout);
      out->result = -2;
    }
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  EXPECT_GT(o.seconds, 0.9) << o.error;
  EXPECT_LT(o.seconds, 1.5) << "within 0.5 s of the config's 1 s, not the communicator's 60 s: " << o.error;
}

// The same for an Async call: its config's timeout, whatever the
// communicator's is when it runs.
TEST_F(CallConfig, ItsTimeoutBoundsAnAsyncCall) {
  auto outcomes = run_world(2, kInitTimeoutMs, {1}, [](int rank, rrComm_t comm, Outcome* out) {
    if (rank == 1) {
      for (;;) pause();
    }
    std::vector<float> data(1000, 1.0f);
    const rrCollConfig_t config = with_timeout(1000);
    rrRequest_t request = nullptr;
    const auto t0 = Clock::now();
    check(rrBroadcastAsyncConfig(data.data(), data.data(), data.size(), rrFloat32, 1, comm, &request, &config) ==
              rrSuccess,
          std::string("rrBroadcastAsyncConfig: ") + rrGetLastError(comm), out);
    if (out->result == -2) return;
    out->result = rrWait(request);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes, {1});
  const Outcome& o = outcomes[0];
  EXPECT_EQ(o.result, rrTimeout) << o.error;
  EXPECT_LT(o.seconds, 1.5) << "the Async call did not take its config's timeout: " << o.error;
}

// The other way: the communicator's timeout is 1 s (set after init), the
// call's own 30 s, and rank 1 comes 2 s late: the call succeeds.
TEST_F(CallConfig, ItsTimeoutWinsOverTheCommunicators) {
  auto outcomes = run_world(2, kInitTimeoutMs, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(1000, 1.0f);
    const rrCollConfig_t config = with_timeout(30000);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
    check(rrCommSetTimeout(comm, 1000) == rrSuccess, "rrCommSetTimeout(1000)", out);
    if (out->result == -2) return;
    const auto t0 = Clock::now();
    out->result = rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr, &config);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
    check(out->result != rrSuccess || data[0] == 2.0f, "wrong sum " + std::to_string(data[0]), out);
  });
  print(outcomes);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << outcomes[r].error;
  EXPECT_GT(outcomes[0].seconds, 1.5) << "rank 0 did not wait for rank 1 (the test's premise)";
}

// A config not made from the initializer, or a timeout below 1 ms: refused
// naming it, before anything is sent (the ranks then agree on the next call).
TEST_F(CallConfig, ABadConfigIsRefusedNamingItAndSendsNothing) {
  auto outcomes = run_world(2, kInitTimeoutMs, {}, [](int, rrComm_t comm, Outcome* out) {
    std::vector<float> data(16, 1.0f);
    auto refused = [&](const rrCollConfig_t& config, const std::string& text) {
      const rrResult_t r = rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr,
                                             &config);
      const std::string error = rrGetLastError(comm);
      check(r == rrInvalidArgument && error.find(text) != std::string::npos,
            "expected rrInvalidArgument saying '" + text + "', got " + rrGetErrorString(r) + ": " + error, out);
    };
    rrCollConfig_t no_magic = RR_COLL_CONFIG_INITIALIZER;
    no_magic.magic = 0;
    refused(no_magic, "rrAllReduce: config was not made from RR_COLL_CONFIG_INITIALIZER");
    rrCollConfig_t too_small = RR_COLL_CONFIG_INITIALIZER;
    too_small.size = sizeof(size_t);
    refused(too_small, "config was not made from RR_COLL_CONFIG_INITIALIZER");
    refused(with_timeout(0), "rrAllReduce: config->timeout_ms=0: must be >= 1");
    refused(with_algorithm("bogus"), "rrAllReduce: config->algorithm=\"bogus\" is not one of auto, ring, rd, hd");
    const rrCollConfig_t ring = with_algorithm("ring");
    const rrResult_t on_broadcast = rrBroadcastConfig(data.data(), data.data(), data.size(), rrFloat32, 0, comm,
                                                      nullptr, &ring);
    check(on_broadcast == rrInvalidArgument &&
              std::string(rrGetLastError(comm)).find("rrBroadcast: config->algorithm=\"ring\": only rrAllReduce") !=
                  std::string::npos,
          std::string("an algorithm on rrBroadcastConfig: ") + rrGetLastError(comm), out);
    rrRequest_t request = nullptr;
    const rrCollConfig_t zero = with_timeout(0);
    check(rrBarrierAsyncConfig(comm, &request, &zero) == rrInvalidArgument && request == nullptr,
          std::string("rrBarrierAsyncConfig with timeout 0: ") + rrGetLastError(comm), out);
    check(rrBarrierAsyncConfig(comm, nullptr, nullptr) == rrInvalidArgument &&
              std::string(rrGetLastError(comm)).find("rrBarrierAsyncConfig: request is NULL") != std::string::npos,
          std::string("rrBarrierAsyncConfig with request NULL: ") + rrGetLastError(comm), out);
    if (out->result == -2) return;
    out->result = rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr, nullptr);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
    check(out->result != rrSuccess || data[0] == 2.0f, "wrong sum after the refusals: " + std::to_string(data[0]),
          out);
  });
  print(outcomes);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << outcomes[r].error;
}

// Ranks that pass different algorithms for one allreduce both fail with
// rrInvalidUsage, each saying what disagreed, instead of hanging or
// reducing garbage; the same call without them succeeds first. (Without
// the config's algorithm both would take the model's choice and succeed.)
TEST_F(CallConfig, RanksPassingDifferentAlgorithmsFailSayingSo) {
  auto outcomes = run_world(2, kInitTimeoutMs, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(256, 1.0f);
    check(rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr, nullptr) ==
              rrSuccess,
          std::string("the call without a config: ") + rrGetLastError(comm), out);
    if (out->result == -2) return;
    const rrCollConfig_t config = with_algorithm(rank == 0 ? "ring" : "rd");
    const auto t0 = Clock::now();
    out->result = rrAllReduceConfig(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr, &config);
    out->seconds = seconds_since(t0);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes);
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = outcomes[static_cast<size_t>(r)];
    EXPECT_EQ(o.result, rrInvalidUsage) << "rank " << r << ": " << o.error;
    EXPECT_LT(o.seconds, 10) << "rank " << r << " waited instead of failing: " << o.error;
  }
}

// Each algorithm a call can force gives the right sums: 3 ranks, counts
// that do not divide, blocking and Async, int32 (exact) and float32 max.
TEST_F(CallConfig, EveryAlgorithmGivesTheRightResult) {
  constexpr int kRanks = 3;
  auto outcomes = run_world(kRanks, kInitTimeoutMs, {}, [](int rank, rrComm_t comm, Outcome* out) {
    for (const char* algorithm : {"ring", "rd", "hd", "oneshot", "auto"}) {
      const rrCollConfig_t config = with_algorithm(algorithm);
      for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{100001}}) {
        for (bool async : {false, true}) {
          std::vector<int32_t> ints(count);
          std::vector<float> floats(count);
          for (size_t i = 0; i < count; ++i) {
            ints[i] = static_cast<int32_t>(i * 7 + rank * 1000);
            floats[i] = static_cast<float>((i * 13 + rank * 5) % 101) - 50.0f;
          }
          auto run = [&](void* buf, rrDataType_t dtype, rrRedOp_t op) {
            rrRequest_t request = nullptr;
            rrResult_t r = async ? rrAllReduceAsyncConfig(buf, buf, count, dtype, op, comm, &request, &config)
                                 : rrAllReduceConfig(buf, buf, count, dtype, op, comm, nullptr, &config);
            if (r == rrSuccess && async) r = rrWait(request);
            check(r == rrSuccess, std::string(algorithm) + ", " + std::to_string(count) + ": " +
                                      rrGetErrorString(r) + ": " + rrGetLastError(comm), out);
          };
          run(ints.data(), rrInt32, rrSum);
          run(floats.data(), rrFloat32, rrMax);
          if (out->result == -2) return;
          for (size_t i = 0; i < count; ++i) {
            int64_t sum = 0;
            float most = -1e30f;
            for (int r = 0; r < kRanks; ++r) {
              sum += static_cast<int64_t>(i * 7 + r * 1000);
              most = std::max(most, static_cast<float>((i * 13 + r * 5) % 101) - 50.0f);
            }
            check(ints[i] == sum && floats[i] == most,
                  std::string(algorithm) + (async ? " (Async)" : "") + ", count " + std::to_string(count) +
                      ": element " + std::to_string(i) + " is " + std::to_string(ints[i]) + " / " +
                      std::to_string(floats[i]) + ", not " + std::to_string(sum) + " / " + std::to_string(most),
                  out);
            if (out->result == -2) return;
          }
        }
      }
    }
    out->result = rrSuccess;
  });
  print(outcomes);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << outcomes[r].error;
}

// Every Config form runs its own collective: 3 ranks, each form blocking
// and Async (waited at once), results against what the collective defines.
TEST_F(CallConfig, EveryFormRunsItsOwnCollective) {
  constexpr int kRanks = 3;
  auto outcomes = run_world(kRanks, kInitTimeoutMs, {}, [](int rank, rrComm_t comm, Outcome* out) {
    const rrCollConfig_t config = with_timeout(20000);
    constexpr size_t n = 5;  // elements per block
    const size_t all = n * kRanks;
    auto value = [](int r, size_t i) { return static_cast<int>(100 * r + i); };
    for (bool async : {false, true}) {
      const std::string form = async ? " (Async)" : "";
      // Runs one form: the blocking one, or the Async one waited at once.
      auto run = [&](const char* what, const std::function<rrResult_t(rrRequest_t*)>& call) {
        rrRequest_t request = nullptr;
        rrResult_t r = call(async ? &request : nullptr);
        if (r == rrSuccess && async) r = rrWait(request);
        check(r == rrSuccess, std::string(what) + form + ": " + rrGetErrorString(r) + ": " + rrGetLastError(comm),
              out);
      };
      std::vector<int> send(all), recv(all, -1);
      for (size_t i = 0; i < all; ++i) send[i] = value(rank, i);
      auto expect = [&](const char* what, size_t i, int want) {
        check(recv[i] == want, std::string(what) + form + ": element " + std::to_string(i) + " is " +
                                   std::to_string(recv[i]) + ", not " + std::to_string(want), out);
      };
      run("rrAllReduceConfig", [&](rrRequest_t* q) {
        return q ? rrAllReduceAsyncConfig(send.data(), recv.data(), all, rrInt32, rrSum, comm, q, &config)
                 : rrAllReduceConfig(send.data(), recv.data(), all, rrInt32, rrSum, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("allreduce", i, value(0, i) + value(1, i) + value(2, i));
      recv.assign(all, -1);
      run("rrReduceScatterConfig", [&](rrRequest_t* q) {
        return q ? rrReduceScatterAsyncConfig(send.data(), recv.data(), n, rrInt32, rrMax, comm, q, &config)
                 : rrReduceScatterConfig(send.data(), recv.data(), n, rrInt32, rrMax, comm, nullptr, &config);
      });
      for (size_t i = 0; i < n; ++i) expect("reduce-scatter", i, value(2, rank * n + i));
      recv.assign(all, -1);
      run("rrAllGatherConfig", [&](rrRequest_t* q) {
        return q ? rrAllGatherAsyncConfig(send.data(), recv.data(), n, rrInt32, comm, q, &config)
                 : rrAllGatherConfig(send.data(), recv.data(), n, rrInt32, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("all-gather", i, value(static_cast<int>(i / n), i % n));
      recv.assign(all, -1);
      run("rrBroadcastConfig", [&](rrRequest_t* q) {
        return q ? rrBroadcastAsyncConfig(send.data(), recv.data(), all, rrInt32, 1, comm, q, &config)
                 : rrBroadcastConfig(send.data(), recv.data(), all, rrInt32, 1, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("broadcast", i, value(1, i));
      recv.assign(all, -1);
      run("rrReduceConfig", [&](rrRequest_t* q) {
        return q ? rrReduceAsyncConfig(send.data(), recv.data(), all, rrInt32, rrMin, 2, comm, q, &config)
                 : rrReduceConfig(send.data(), recv.data(), all, rrInt32, rrMin, 2, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("reduce", i, rank == 2 ? value(0, i) : -1);
      recv.assign(all, -1);
      run("rrGatherConfig", [&](rrRequest_t* q) {
        return q ? rrGatherAsyncConfig(send.data(), recv.data(), n, rrInt32, 0, comm, q, &config)
                 : rrGatherConfig(send.data(), recv.data(), n, rrInt32, 0, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("gather", i, rank == 0 ? value(static_cast<int>(i / n), i % n) : -1);
      recv.assign(all, -1);
      run("rrScatterConfig", [&](rrRequest_t* q) {
        return q ? rrScatterAsyncConfig(send.data(), recv.data(), n, rrInt32, 1, comm, q, &config)
                 : rrScatterConfig(send.data(), recv.data(), n, rrInt32, 1, comm, nullptr, &config);
      });
      for (size_t i = 0; i < n; ++i) expect("scatter", i, value(1, rank * n + i));
      recv.assign(all, -1);
      run("rrAllToAllConfig", [&](rrRequest_t* q) {
        return q ? rrAllToAllAsyncConfig(send.data(), recv.data(), n, rrInt32, comm, q, &config)
                 : rrAllToAllConfig(send.data(), recv.data(), n, rrInt32, comm, nullptr, &config);
      });
      for (size_t i = 0; i < all; ++i) expect("all-to-all", i, value(static_cast<int>(i / n), rank * n + i % n));
      recv.assign(all, -1);
      // All-to-all-v: one element from each peer p, its block rank's first.
      std::vector<size_t> counts(kRanks, 1), sdispls(kRanks), rdispls(kRanks);
      for (int p = 0; p < kRanks; ++p) sdispls[p] = p * n, rdispls[p] = p;
      run("rrAllToAllvConfig", [&](rrRequest_t* q) {
        return q ? rrAllToAllvAsyncConfig(send.data(), counts.data(), sdispls.data(), recv.data(), counts.data(),
                                          rdispls.data(), rrInt32, comm, q, &config)
                 : rrAllToAllvConfig(send.data(), counts.data(), sdispls.data(), recv.data(), counts.data(),
                                     rdispls.data(), rrInt32, comm, nullptr, &config);
      });
      for (int p = 0; p < kRanks; ++p) expect("all-to-all-v", p, value(p, rank * n));
      run("rrBarrierConfig", [&](rrRequest_t* q) {
        return q ? rrBarrierAsyncConfig(comm, q, &config) : rrBarrierConfig(comm, nullptr, &config);
      });
    }
    if (out->result != -2) out->result = rrSuccess;
  });
  print(outcomes);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(outcomes[static_cast<size_t>(r)].result, rrSuccess) << outcomes[r].error;
}

}  // namespace
