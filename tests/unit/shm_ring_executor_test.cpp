// The slot rings' executor with N ranks as threads of one process (each
// rank makes the ring it receives on and attaches to its right
// neighbour's, as over processes): results against a float64 reference,
// in and out of place, counts that do not divide; and what it moves of
// each buffer against the memory-traffic model (algo/memory_traffic.hpp):
// every input byte read once, every output byte written once.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "algo/memory_traffic.hpp"
#include "algo/ring.hpp"
#include "exec/shm_ring_executor.hpp"
#include "transport/loopback/loopback.hpp"
#include "transport/shm/slot_ring.hpp"

namespace rr::exec {
namespace {

using transport::shm::SlotRing;

struct Rank {
  std::unique_ptr<transport::LoopbackTransport> transport;
  std::unique_ptr<SlotRing> from_left;  // made here
  std::unique_ptr<SlotRing> to_right;   // the right neighbour's, attached
  std::unique_ptr<ShmRingExecutor> executor;
};

struct World {
  World(int n, size_t slots, size_t slot_bytes) : fabric(std::make_shared<transport::LoopbackFabric>(n)), ranks(n) {
    for (int r = 0; r < n; ++r) {
      ranks[r].transport = std::make_unique<transport::LoopbackTransport>(fabric, r);
      EXPECT_TRUE(SlotRing::create(slots, slot_bytes, &ranks[r].from_left).ok());
    }
    for (int r = 0; r < n; ++r) {
      const SlotRing& right = *ranks[(r + 1) % n].from_left;
      EXPECT_TRUE(SlotRing::attach(static_cast<int>(getpid()), right.fd(), slots, slot_bytes, &ranks[r].to_right).ok());
    }
    for (int r = 0; r < n; ++r) {
      ranks[r].executor = std::make_unique<ShmRingExecutor>(ranks[r].transport.get(), ranks[r].from_left.get(),
                                                            ranks[r].to_right.get());
    }
  }
  std::shared_ptr<transport::LoopbackFabric> fabric;
  std::vector<Rank> ranks;
};

// One allreduce of doubles on every rank, each on its own thread.
std::vector<Status> run_allreduce(World& world, std::vector<std::vector<double>>& in,
                                  std::vector<std::vector<double>>& out, size_t chunk_elems, bool in_place,
                                  rrRedOp_t op) {
  const int n = static_cast<int>(world.ranks.size());
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (in_place) out[r] = in[r];
      Call call;
      call.sequence = 3;
      call.dtype = rrFloat64;
      call.op = op;
      call.send = in_place ? out[r].data() : in[r].data();
      call.recv = out[r].data();
      call.count = in[r].size();
      call.deadline = Clock::now() + std::chrono::seconds(20);
      algo::RingSchedule schedule(n, r, call.count, chunk_elems);
      results[r] = world.ranks[r].executor->run(schedule, call);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class ShmRingExecutorAllreduce : public ::testing::TestWithParam<std::tuple<int, size_t, bool>> {};

TEST_P(ShmRingExecutorAllreduce, MatchesFloat64ReferenceAndTheTrafficModel) {
  const auto [n, count, in_place] = GetParam();
  const size_t slot_bytes = 64 * sizeof(double);  // many columns
  World world(n, 2, slot_bytes);
  std::mt19937_64 rng(count * 17 + static_cast<size_t>(n) * 2 + in_place);
  std::uniform_int_distribution<int> value(-1000, 1000);
  // Sum and avg with the output written by plain stores, max with
  // non-temporal ones (out of place; reduce/stream_copy.hpp).
  for (rrRedOp_t op : {rrSum, rrAvg, rrMax}) {
    for (Rank& rank : world.ranks) rank.executor->set_stream_bytes(op == rrMax ? 1 : 0);
    std::vector<std::vector<double>> in(n, std::vector<double>(count)), out(n, std::vector<double>(count, -1.0));
    std::vector<double> expect(count, op == rrMax ? -HUGE_VAL : 0.0);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        in[r][i] = value(rng) / 8.0;  // sums exact in double
        expect[i] = op == rrMax ? std::max(expect[i], in[r][i]) : expect[i] + in[r][i];
      }
    }
    if (op == rrAvg) {
      for (double& e : expect) e /= n;
    }
    std::vector<Traffic> before(n);
    for (int r = 0; r < n; ++r) before[r] = world.ranks[r].executor->traffic();
    for (const Status& s : run_allreduce(world, in, out, slot_bytes / sizeof(double), in_place, op)) {
      ASSERT_TRUE(s.ok()) << s.message();
    }
    const algo::MemoryTraffic model = algo::allreduce_traffic(algo::Schedule::kSameHostRing, n);
    ASSERT_TRUE(model.known);
    const double bytes = static_cast<double>(count * sizeof(double));
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_DOUBLE_EQ(out[r][i], expect[i]) << "rank " << r << " element " << i << " op " << op;
      }
      const Traffic& t = world.ranks[r].executor->traffic();
      const Traffic& b = before[r];
      // Exactly: each input byte read once and each output byte written once.
      EXPECT_EQ(t.buffer_read - b.buffer_read, static_cast<uint64_t>(model.buffer_read * bytes)) << "rank " << r;
      EXPECT_EQ(t.buffer_written - b.buffer_written, static_cast<uint64_t>(model.buffer_written * bytes)) << "rank " << r;
      // Up to the rounding of uneven segments: an element per step and access.
      const double slack = 3.0 * n * sizeof(double);
      EXPECT_NEAR(static_cast<double>(t.reduced - b.reduced), model.reduced * bytes, slack) << "rank " << r;
      EXPECT_NEAR(static_cast<double>(t.shared_written - b.shared_written), model.shared_written * bytes, slack)
          << "rank " << r;
      EXPECT_NEAR(static_cast<double>(t.shared_read - b.shared_read), model.shared_read * bytes, slack)
          << "rank " << r;
      // What was written to the slots is what was sent.
      EXPECT_EQ(t.shared_written, world.ranks[r].executor->bytes_sent()) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ShmRingExecutorAllreduce,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5), ::testing::Values(size_t{0}, size_t{1},
                                                                                           size_t{7}, size_t{1000},
                                                                                           size_t{100003}),
                                            ::testing::Bool()));

// A peer that never calls: rank 0 alone runs an allreduce on 2 ranks'
// rings, until `deadline` or `interrupt`.
Status run_alone(World& world, Clock::time_point deadline, Interrupt* interrupt) {
  std::vector<double> data(1000, 1.0);
  Call call;
  call.sequence = 5;
  call.dtype = rrFloat64;
  call.send = data.data();
  call.recv = data.data();
  call.count = data.size();
  call.deadline = deadline;
  call.interrupt = interrupt;
  algo::RingSchedule schedule(2, 0, call.count, 100);
  return world.ranks[0].executor->run(schedule, call);
}

TEST(ShmRingExecutorStall, AChunkThatNeverComesTimesOutNamingIt) {
  World world(2, 4, 4096);
  const Status s = run_alone(world, Clock::now() + std::chrono::milliseconds(100), nullptr);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_EQ(s.message(),
            "allreduce #5 timed out: rank 0 waited for chunk 0 of reduce-scatter step 0 from rank 1 (same-host "
            "shared memory)");
}

// Fires once the wait has slept a while: what a peer's notice does.
class LateInterrupt final : public Interrupt {
 public:
  explicit LateInterrupt(Clock::time_point at) : at_(at) {}
  Status check() override {
    return Clock::now() >= at_ ? RemoteError("rank 1 reported: it gave up") : Status::Ok();
  }

 private:
  Clock::time_point at_;
};

TEST(ShmRingExecutorStall, ASleepingWaitSeesAnInterruptWithinItsSleeps) {
  World world(2, 4, 4096);
  LateInterrupt interrupt(Clock::now() + std::chrono::milliseconds(300));
  const auto start = Clock::now();
  const Status s = run_alone(world, Clock::now() + std::chrono::seconds(60), &interrupt);
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("rank 1 reported: it gave up"), std::string::npos) << s.message();
  // Checked after every sleep (10 ms) once the wait sleeps: far below the
  // 60 s deadline, whatever the machine's load.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
}

TEST(MemoryTraffic, BoundIsTheSlowerOfCopyingAndReducing) {
  algo::MachineRates rates;
  rates.copy_bytes_per_s = 10e9;
  rates.reduce_bytes_per_s = 40e9;
  const algo::MemoryTraffic ring2 = algo::allreduce_traffic(algo::Schedule::kSameHostRing, 2);
  // Two ranks: the input read and the output written, a memcpy's traffic.
  EXPECT_DOUBLE_EQ(algo::traffic_bound_seconds(ring2, 1000000000, rates), 0.1);
  rates.reduce_bytes_per_s = 2e9;  // half the buffer reduced at 2 GB/s: 0.25 s
  EXPECT_DOUBLE_EQ(algo::traffic_bound_seconds(ring2, 1000000000, rates), 0.25);
  EXPECT_EQ(algo::traffic_bound_seconds(algo::allreduce_traffic(algo::Schedule::kRing, 2), 1000, rates), 0.0);
  const algo::MemoryTraffic one_shot4 = algo::allreduce_traffic(algo::Schedule::kOneShot, 4);
  EXPECT_DOUBLE_EQ(one_shot4.buffer_written, 3.0);
  EXPECT_DOUBLE_EQ(one_shot4.reduced, 3.0);
}

TEST(MemoryTraffic, StreamingStartsWhereTheRanksBuffersOutgrowTheLastLevelCache) {
  constexpr size_t kCap = size_t{32} << 20;
  // 32 MiB of L3: 2 ranks' inputs and outputs fill it at 8 MiB each, 4 ranks' at 4.
  EXPECT_EQ(algo::stream_threshold(size_t{32} << 20, 2, kCap), size_t{8} << 20);
  EXPECT_EQ(algo::stream_threshold(size_t{32} << 20, 4, kCap), size_t{4} << 20);
  // A cache reported larger than anything measured: the cap.
  EXPECT_EQ(algo::stream_threshold(size_t{480} << 20, 2, kCap), kCap);
  // Unknown cache, or no ranks: the cap.
  EXPECT_EQ(algo::stream_threshold(0, 2, kCap), kCap);
  EXPECT_EQ(algo::stream_threshold(size_t{32} << 20, 0, kCap), kCap);
}

}  // namespace
}  // namespace rr::exec
