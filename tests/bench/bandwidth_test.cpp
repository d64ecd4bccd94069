// The bus-bandwidth factors against the ones nccl-tests publishes
// (doc/PERFORMANCE.md and each *_GetBw in nccl-tests/src), written out here
// as plain numbers, not as the formulas under test.

#include <gtest/gtest.h>

#include <iterator>

#include "bandwidth.h"
#include "collective.h"

namespace rrbench {
namespace {

struct Published {
  CollKind kind;
  int nranks;
  double factor;
};

// allreduce 2(n-1)/n; reducescatter, allgather, alltoall (n-1)/n; broadcast, reduce, sendrecv 1.
const Published kPublished[] = {
    {CollKind::kAllReduce, 1, 0.0},       {CollKind::kAllReduce, 2, 1.0},      {CollKind::kAllReduce, 4, 1.5},
    {CollKind::kAllReduce, 8, 1.75},      {CollKind::kAllReduce, 3, 4.0 / 3}, {CollKind::kReduceScatter, 2, 0.5},
    {CollKind::kReduceScatter, 8, 0.875}, {CollKind::kAllGather, 4, 0.75},     {CollKind::kAllGather, 3, 2.0 / 3},
    {CollKind::kBroadcast, 2, 1.0},       {CollKind::kBroadcast, 8, 1.0},      {CollKind::kReduce, 4, 1.0},
    {CollKind::kAllToAll, 2, 0.5},        {CollKind::kAllToAll, 8, 0.875},     {CollKind::kSendRecv, 2, 1.0},
    {CollKind::kSendRecv, 8, 1.0},
};

TEST(BusFactor, MatchesNcclTestsPublishedFactors) {
  for (const Published& p : kPublished) {
    EXPECT_DOUBLE_EQ(bus_factor(p.kind, p.nranks), p.factor)
        << "kind " << static_cast<int>(p.kind) << ", " << p.nranks << " ranks";
  }
}

TEST(BusFactor, AllReduceCollectiveUsesTwoNMinusOneOverN) {
  for (int n = 1; n <= 64; ++n) EXPECT_DOUBLE_EQ(kAllReduce.bus_factor(n), 2.0 * (n - 1) / n) << n << " ranks";
}

TEST(Bandwidth, AlgbwIsBytesOverTimeInGBps) {
  EXPECT_DOUBLE_EQ(alg_bandwidth(1e9, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(alg_bandwidth(64.0 * (1 << 20), 0.01), 6.7108864);
  // 4 ranks, 1 GB allreduced in 1 s: busbw 1.5 GB/s.
  EXPECT_DOUBLE_EQ(bus_bandwidth(CollKind::kAllReduce, 4, 1e9, 1.0), 1.5);
  EXPECT_DOUBLE_EQ(alg_bandwidth(1e9, 0.0), 0.0);
}

TEST(Collectives, EachFileCarriesItsPublishedFactor) {
  // nccl-tests' names (all_reduce_perf -> allreduce) and factors at 4 ranks.
  const struct {
    const char* name;
    double factor;
  } kExpected[] = {{"allreduce", 1.5}, {"reducescatter", 0.75}, {"allgather", 0.75}, {"broadcast", 1.0},
                   {"reduce", 1.0},    {"alltoall", 0.75},      {"sendrecv", 1.0}};
  ASSERT_EQ(all_collectives().size(), std::size(kExpected));
  for (const auto& e : kExpected) {
    const Collective* coll = find_collective(e.name);
    ASSERT_NE(coll, nullptr) << e.name;
    EXPECT_DOUBLE_EQ(coll->bus_factor(4), e.factor) << e.name;
  }
  EXPECT_EQ(find_collective("all_reduce"), nullptr);
}

TEST(Collectives, SplittingCollectivesRoundTheCountToRanks) {
  EXPECT_EQ(kReduceScatter.row_count(1001, 4), 1000u);
  EXPECT_EQ(kAllGather.row_count(3, 4), 0u);
  EXPECT_EQ(kAllToAll.row_count(1024, 3), 1023u);
  EXPECT_EQ(kAllReduce.row_count(1001, 4), 1001u);
  EXPECT_EQ(kBroadcast.row_count(7, 4), 7u);
}

}  // namespace
}  // namespace rrbench
