// The executor over the in-process loopback transport: N ranks as threads,
// several chunk columns in flight, results checked against a double-precision
// reference; the bytes each rank sends; failures and timeouts that name the
// step, chunk and peer.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "algo/ring.hpp"
#include "exec/ring_executor.hpp"
#include "memory/staging_pool.hpp"
#include "../common/host_reducer.hpp"
#include "transport/loopback/loopback.hpp"

namespace rr::exec {
namespace {

struct Rank {
  std::unique_ptr<transport::LoopbackTransport> transport;
  memory::StagingPool pool;
  std::unique_ptr<RingExecutor> executor;
};

struct World {
  World(int n, size_t chunk_bytes, int depth) : fabric(std::make_shared<transport::LoopbackFabric>(n)), ranks(n) {
    for (int r = 0; r < n; ++r) {
      ranks[r].transport = std::make_unique<transport::LoopbackTransport>(fabric, r);
      EXPECT_TRUE(ranks[r].pool.reserve(chunk_bytes, 2 * static_cast<size_t>(depth)).ok());
      ranks[r].executor = std::make_unique<RingExecutor>(ranks[r].transport.get(), &ranks[r].pool, depth, n);
    }
  }
  std::shared_ptr<transport::LoopbackFabric> fabric;
  std::vector<Rank> ranks;
};

// Runs the ring on every rank but `absent_rank`, each on its own thread: an
// allreduce of doubles (sum), whose buffers, count and reducer `setup(r,
// call)` fills in; `after(r, result)` runs on the rank's thread once its call
// returned.
std::vector<Status> run_on_threads(World& world, size_t chunk_elems, uint64_t sequence, int timeout_ms,
                                   const std::function<void(int, Call&)>& setup, int absent_rank = -1,
                                   const std::function<void(int, const Status&)>& after = {}) {
  const int n = static_cast<int>(world.ranks.size());
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (r == absent_rank) continue;
    threads.emplace_back([&, r] {
      Call call;
      call.sequence = sequence;
      call.dtype = rrFloat64;
      call.op = rrSum;
      call.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
      setup(r, call);
      algo::RingSchedule schedule(n, r, call.count, chunk_elems);
      results[r] = world.ranks[r].executor->run(schedule, call);
      if (after) after(r, results[r]);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// Runs one allreduce of doubles (sum) on every rank, in place or not.
std::vector<Status> run_allreduce(World& world, std::vector<std::vector<double>>& in,
                                  std::vector<std::vector<double>>& out, size_t chunk_elems, bool in_place,
                                  int absent_rank = -1, int timeout_ms = 10000) {
  return run_on_threads(
      world, chunk_elems, 7, timeout_ms,
      [&](int r, Call& call) {
        if (in_place) out[r] = in[r];
        call.send = in_place ? out[r].data() : in[r].data();
        call.recv = out[r].data();
        call.count = in[r].size();
      },
      absent_rank);
}

class RingExecutorSums : public ::testing::TestWithParam<std::tuple<int, size_t, bool>> {};

TEST_P(RingExecutorSums, MatchesDoubleReference) {
  const auto [n, count, in_place] = GetParam();
  const size_t chunk_elems = 5;  // small chunks: many columns, depth-limited pipelining
  World world(n, chunk_elems * sizeof(double), 3);
  std::mt19937_64 rng(count * 31 + n);
  std::uniform_int_distribution<int> value(-1000, 1000);
  std::vector<std::vector<double>> in(n, std::vector<double>(count)), out(n, std::vector<double>(count, -1.0));
  std::vector<double> expect(count, 0.0);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) expect[i] += (in[r][i] = value(rng) / 8.0);  // exact in double
  for (const Status& s : run_allreduce(world, in, out, chunk_elems, in_place)) ASSERT_TRUE(s.ok()) << s.message();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(out[r], expect) << "rank " << r;
    // Bandwidth optimality: exactly 2(N-1)/N of the buffer leaves each rank,
    // all of it to the right neighbour (up to the rounding of uneven segments).
    uint64_t sent = 0;
    for (int p = 0; p < n; ++p) sent += world.ranks[r].transport->bytes_sent(p);
    EXPECT_EQ(sent, world.ranks[r].transport->bytes_sent((r + 1) % n));
    algo::RingSchedule s(n, r, count, chunk_elems);
    uint64_t exact = 0;
    for (int step = 0; step < s.steps(); ++step) exact += s.segment(s.send_segment(step)).count * sizeof(double);
    EXPECT_EQ(sent, exact);
    const double ideal = 2.0 * (n - 1) / n * count * sizeof(double);
    EXPECT_LE(std::abs(static_cast<double>(sent) - ideal), 2.0 * (n - 1) * sizeof(double));
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, RingExecutorSums,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 7, 8), ::testing::Values(size_t{0}, size_t{1}, size_t{2}, size_t{6}, size_t{97}, size_t{1000}),
                                            ::testing::Bool()));

TEST(RingExecutor, AbsentPeerTimesOutNamingStepChunkAndPeer) {
  const int n = 3;
  World world(n, 64, 2);
  std::vector<std::vector<double>> in(n, std::vector<double>(40, 1.0)), out(n, std::vector<double>(40));
  auto results = run_allreduce(world, in, out, 8, false, /*absent_rank=*/2, /*timeout_ms=*/300);
  // Rank 0 waits on rank 2 (its left neighbour) in the very first step.
  EXPECT_EQ(results[0].code(), Code::kTimeout);
  EXPECT_NE(results[0].message().find("from rank 2"), std::string::npos) << results[0].message();
  EXPECT_NE(results[0].message().find("reduce-scatter step 0"), std::string::npos) << results[0].message();
  EXPECT_NE(results[0].message().find("chunk 0"), std::string::npos) << results[0].message();
  EXPECT_EQ(results[1].code(), Code::kTimeout);
}

TEST(RingExecutor, FailedPeerIsNamed) {
  const int n = 3;
  World world(n, 64, 2);
  world.fabric->fail_rank(2);
  std::vector<std::vector<double>> in(n, std::vector<double>(40, 1.0)), out(n, std::vector<double>(40));
  auto results = run_allreduce(world, in, out, 8, false, /*absent_rank=*/2, /*timeout_ms=*/5000);
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), Code::kRemoteError) << results[r].message();
    EXPECT_NE(results[r].message().find("rank 2"), std::string::npos) << results[r].message();
  }
}

TEST(RingExecutor, WrongLengthFromPeerIsReported) {
  // Rank 1 thinks the buffer is longer: rank 0 must say who sent what.
  const int n = 2;
  World world(n, 64, 2);
  std::vector<std::vector<double>> in = {std::vector<double>(10, 1.0), std::vector<double>(12, 1.0)};
  std::vector<std::vector<double>> out = {std::vector<double>(10), std::vector<double>(12)};
  auto results = run_allreduce(world, in, out, 8, false, -1, 500);
  EXPECT_FALSE(results[0].ok());
  EXPECT_FALSE(results[1].ok());
  const std::string all = results[0].message() + " | " + results[1].message();
  EXPECT_NE(all.find("expected"), std::string::npos) << all;
}

// A rank that has everything may return and leave (its endpoints close)
// while its left neighbour still receives its own last chunk: that
// neighbour needs nothing more from it and must still succeed. Each rank
// here "exits" (fail_rank) the moment its call returns; the ranks whose last
// chunk is still on its way must finish anyway.
TEST(RingExecutor, ANeighbourThatFinishedAndLeftIsNotAFailure) {
  for (int n : {3, 4, 8}) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{64}}) {
      for (int round = 0; round < 20; ++round) {
        World world(n, 8 * sizeof(double), 2);
        std::vector<std::vector<double>> in(n, std::vector<double>(count)), out(n, std::vector<double>(count));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) in[r][i] = r + 1;
        const auto results = run_on_threads(
            world, 8, 9, 10000,
            [&](int r, Call& call) {
              call.send = in[r].data();
              call.recv = out[r].data();
              call.count = count;
            },
            -1, [&](int r, const Status& result) {
              if (result.ok()) world.fabric->fail_rank(r);  // done: this rank leaves
            });
        const double sum = n * (n + 1) / 2.0;
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(results[r].ok()) << n << " ranks, count " << count << ", round " << round << ", rank " << r
                                       << ": " << results[r].message();
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r][i], sum) << "rank " << r << " element " << i;
        }
      }
    }
  }
}

// With a reducer, this rank's values come from reduce_source; send is read
// only for what this rank sends first (its own segment, unreduced). Here the
// rest of send is NaN, so a reduction reading send instead shows.
TEST(RingExecutor, AReducerReducesWithTheValuesOfTheReduceSource) {
  for (int n : {2, 3, 5}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      World world(n, 4 * sizeof(double), 3);
      std::vector<std::vector<double>> source(n, std::vector<double>(count)), send(n), out(n);
      std::vector<test::HostReducer> reducers(n);
      std::vector<double> expect(count, 0.0);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) expect[i] += (source[r][i] = static_cast<double>(r * 1000 + i % 97));
        send[r].assign(count, std::nan(""));
        algo::RingSchedule s(n, r, count, 4);
        const algo::Range own = s.segment(s.send_segment(0));
        for (size_t i = own.offset; i < own.offset + own.count; ++i) send[r][i] = source[r][i];
        out[r] = send[r];  // in place, as the staging path runs it
      }
      const auto results = run_on_threads(world, 4, 11, 10000, [&](int r, Call& call) {
        call.send = out[r].data();
        call.recv = out[r].data();
        call.count = count;
        call.reducer = &reducers[r];
        call.reduce_source = source[r].data();
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok()) << results[r].message();
        EXPECT_EQ(out[r], expect) << n << " ranks, count " << count << ", rank " << r;
        // (With fewer elements than ranks, some ranks receive nothing to reduce.)
        if (count >= static_cast<size_t>(n)) {
          EXPECT_GT(reducers[r].calls.load(), 0) << "the host reduced instead";
        }
      }
    }
  }
}

TEST(RingExecutor, AFailedReductionFailsTheCallNamingTheChunk) {
  const int n = 2;
  const size_t count = 64;
  World world(n, 8 * sizeof(double), 2);
  std::vector<std::vector<double>> data(n, std::vector<double>(count, 1.0));
  std::vector<test::HostReducer> reducers{test::HostReducer(true), test::HostReducer(true)};
  const auto results = run_on_threads(world, 8, 12, 5000, [&](int r, Call& call) {
    call.send = data[r].data();
    call.recv = data[r].data();
    call.count = count;
    call.reducer = &reducers[r];
    call.reduce_source = data[r].data();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r].code(), Code::kSystemError) << results[r].message();
    EXPECT_EQ(results[r].message().rfind("allreduce #12: rank " + std::to_string(r) + ": reducing chunk ", 0), 0u)
        << results[r].message();
    EXPECT_NE(results[r].message().find("the reducer broke"), std::string::npos) << results[r].message();
  }
}

}  // namespace
}  // namespace rr::exec
