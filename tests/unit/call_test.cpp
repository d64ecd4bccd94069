// The call descriptor (exec/call.hpp): how a call is named in every message,
// its deadline, and that an executor whose post the transport refuses says
// which call met it (the ring's and the chain's, on the loopback transport
// with the peer marked failed before the call).

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "algo/ring.hpp"
#include "exec/call.hpp"
#include "exec/chain_executor.hpp"
#include "exec/ring_executor.hpp"
#include "exec/stall.hpp"
#include "exec/wire.hpp"
#include "memory/staging_pool.hpp"
#include "transport/loopback/loopback.hpp"

namespace rr::exec {
namespace {

TEST(Call, NameAndLabel) {
  Call call;
  call.collective = Collective::kReduceScatter;
  call.sequence = 18446744073709551615ull;
  EXPECT_EQ(call.name(), "reduce-scatter #18446744073709551615");
  EXPECT_EQ(call.label(), "reduce-scatter #18446744073709551615");  // no schedule yet
  call.schedule = algo::Schedule::kSameHostRing;
  EXPECT_EQ(call.label(), "reduce-scatter #18446744073709551615 (ring)");  // errors say "ring" for both rings
  std::string reused = "something longer than the label, whose storage is reused";
  call.collective = Collective::kBarrier;
  call.sequence = 7;
  call.schedule = algo::Schedule::kOneShot;
  call.write_label(&reused);
  EXPECT_EQ(reused, "barrier #7 (one-shot)");
  const Status error = call.error(Code::kTimeout, "rank 2 waited");
  EXPECT_EQ(error.code(), Code::kTimeout);
  EXPECT_EQ(error.message(), "barrier #7: rank 2 waited");
}

// One row per schedule, in the enum's order (schedule.cpp asserts that at
// compile time), with the names rrCommGetAlgorithm and the errors have said.
TEST(Call, ScheduleTable) {
  const struct {
    algo::Schedule schedule;
    const char* word;
    const char* name;
  } rows[] = {
      {algo::Schedule::kNone, "", "unknown"},
      {algo::Schedule::kLocalCopy, "local copy", "local copy"},
      {algo::Schedule::kRing, "ring", "ring"},
      {algo::Schedule::kSameHostRing, "ring", "ring (shared memory)"},
      {algo::Schedule::kRecursiveDoubling, "recursive doubling", "recursive doubling"},
      {algo::Schedule::kHalvingDoubling, "halving-doubling", "halving-doubling"},
      {algo::Schedule::kOneShot, "one-shot", "one-shot (shared memory)"},
      {algo::Schedule::kBinomialTree, "binomial tree", "binomial tree"},
      {algo::Schedule::kChain, "chain", "chain"},
      {algo::Schedule::kDirect, "direct", "direct"},
      {algo::Schedule::kArgumentCheck, "argument check", "argument check"},
  };
  static_assert(sizeof(rows) / sizeof(rows[0]) == static_cast<size_t>(algo::Schedule::kLast) + 1);
  for (const auto& row : rows) {
    EXPECT_STREQ(algo::schedule_word(row.schedule), row.word);
    EXPECT_STREQ(algo::schedule_name(row.schedule), row.name);
  }
  using algo::AllreduceAlgo;
  EXPECT_EQ(algo::allreduce_schedule(AllreduceAlgo::kRing, true), algo::Schedule::kSameHostRing);
  EXPECT_EQ(algo::allreduce_schedule(AllreduceAlgo::kAuto, false), algo::Schedule::kRing);
  EXPECT_EQ(algo::allreduce_schedule(AllreduceAlgo::kOneShot, true), algo::Schedule::kOneShot);
  EXPECT_EQ(algo::allreduce_schedule(AllreduceAlgo::kRecursiveDoubling, true), algo::Schedule::kRecursiveDoubling);
  EXPECT_EQ(algo::allreduce_schedule(AllreduceAlgo::kHalvingDoubling, false), algo::Schedule::kHalvingDoubling);
}

TEST(Call, EveryCollectiveHasItsNameAndTheHeaderNamesItAlike) {
  for (int c = 1; c <= static_cast<int>(Collective::kLast); ++c) {
    Call call;
    call.collective = static_cast<Collective>(c);
    call.sequence = 41;
    call.count = 3;
    EXPECT_STRNE(collective_name(call.collective), "unknown collective") << c;
    const wire::OpHeader header = wire::header_of(call);
    EXPECT_EQ(header.name(), call.name());
    EXPECT_EQ(header.describe().rfind(call.name(), 0), 0u) << header.describe();
  }
}

TEST(Call, TheDeadlineStartsAtTheFirstAskUnlessSet) {
  Call lazy;
  lazy.timeout = std::chrono::milliseconds(5000);
  const auto before = Clock::now();
  const auto first = lazy.until();
  EXPECT_GE(first, before + std::chrono::milliseconds(5000));
  EXPECT_EQ(lazy.until(), first);  // fixed from then on
  Call set;
  set.deadline = before + std::chrono::milliseconds(1);
  set.timeout = std::chrono::milliseconds(5000);
  EXPECT_EQ(set.until(), before + std::chrono::milliseconds(1));
}

TEST(Call, OneStallMessageForEveryExecutor) {
  Call call;
  call.sequence = 7;
  Stall ring;
  ring.rank = 0;
  ring.wait = Stall::Wait::kChunk;
  ring.peer = 3;
  ring.chunk = 2;
  ring.phase = "reduce-scatter";
  ring.phase_step = 1;
  ring.done = 2;
  ring.total = 8;
  EXPECT_EQ(stalled(call, Code::kTimeout, ring).message(),
            "allreduce #7 timed out: rank 0 waited for chunk 2 of reduce-scatter step 1 from rank 3 (2 of 8 chunk "
            "columns done)");
  ring.wait = Stall::Wait::kTake;
  ring.peer = 1;
  const Status failed = stalled(call, Code::kRemoteError, ring, "rank 1 failed");
  EXPECT_EQ(failed.code(), Code::kRemoteError);
  EXPECT_EQ(failed.message(),
            "allreduce #7 failed: rank 0 waited for rank 1 to take chunk 2 of reduce-scatter step 1 (2 of 8 chunk "
            "columns done): rank 1 failed");
  Stall slots;
  slots.rank = 2;
  slots.wait = Stall::Wait::kRoom;
  slots.peer = 3;
  slots.chunk = 5;
  slots.phase = "all-gather";
  slots.path = "same-host shared memory";
  EXPECT_EQ(stalled(call, Code::kTimeout, slots).message(),
            "allreduce #7 timed out: rank 2 waited for rank 3 to take a chunk before chunk 5 of all-gather step 0 "
            "(same-host shared memory)");
  call.collective = Collective::kBroadcast;
  Stall chain;
  chain.rank = 1;
  chain.wait = Stall::Wait::kChunk;
  chain.peer = 0;
  chain.chunk = 4;
  chain.done = 4;
  chain.total = 9;
  chain.unit = "chunks";
  EXPECT_EQ(stalled(call, Code::kOk, chain).message(),
            "broadcast #7 in progress: rank 1 waited for chunk 4 from rank 0 (4 of 9 chunks done)");
  Stall idle;
  idle.rank = 1;
  idle.done = 3;
  idle.total = 3;
  EXPECT_EQ(stalled(call, Code::kOk, idle).message(), "broadcast #7 in progress: rank 1 (3 of 3 chunk columns done)");
}

// Rank 0 of two runs alone, its neighbour marked failed: the transport
// refuses the first post, and the error names the call and the rank.
struct Lonely {
  Lonely() : fabric(std::make_shared<transport::LoopbackFabric>(2)), transport(fabric, 0) {
    EXPECT_TRUE(pool.reserve(64, 4).ok());
    fabric->fail_rank(1);
    call.sequence = 13;
    call.send = data.data();
    call.recv = data.data();
    call.count = data.size();
    call.dtype = rrFloat64;
    call.timeout = std::chrono::milliseconds(5000);
  }
  std::shared_ptr<transport::LoopbackFabric> fabric;
  transport::LoopbackTransport transport;
  memory::StagingPool pool;
  std::vector<double> data = std::vector<double>(16, 1.0);
  Call call;
};

TEST(Call, ARingPostTheTransportRefusesNamesTheCall) {
  Lonely world;
  RingExecutor ring(&world.transport, &world.pool, 2, 2);
  algo::RingSchedule schedule(2, 0, world.call.count, 8);
  const Status status = ring.run(schedule, world.call);
  EXPECT_EQ(status.code(), Code::kRemoteError);
  EXPECT_EQ(status.message(), "allreduce #13: rank 0: rank 1 has failed");
}

TEST(Call, AChainPostTheTransportRefusesNamesTheCall) {
  Lonely world;
  world.call.collective = Collective::kBroadcast;
  world.call.root = 0;  // rank 0 heads the chain: its first post is a send to rank 1
  ChainExecutor chain(&world.transport, &world.pool, 2, 2, 0);
  const Status status = chain.run(world.call, 8);
  EXPECT_EQ(status.code(), Code::kRemoteError);
  EXPECT_EQ(status.message(), "broadcast #13: rank 0: rank 1 has failed");
}

}  // namespace
}  // namespace rr::exec
