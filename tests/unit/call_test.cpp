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
#include "comm/wire.hpp"
#include "exec/call.hpp"
#include "exec/chain_executor.hpp"
#include "exec/ring_executor.hpp"
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
  call.schedule = "ring";
  EXPECT_EQ(call.label(), "reduce-scatter #18446744073709551615 (ring)");
  std::string reused = "something longer than the label, whose storage is reused";
  call.collective = Collective::kBarrier;
  call.sequence = 7;
  call.schedule = "one-shot";
  call.write_label(&reused);
  EXPECT_EQ(reused, "barrier #7 (one-shot)");
  const Status error = call.error(Code::kTimeout, "rank 2 waited");
  EXPECT_EQ(error.code(), Code::kTimeout);
  EXPECT_EQ(error.message(), "barrier #7: rank 2 waited");
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
