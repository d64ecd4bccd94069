// The C++ wrapper (ringreduce.hpp): RAII, typed calls, and failures as
// rr::Error carrying the result code and the library's message.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace {

TEST(Wrapper, TypedCollectivesAndSplit) {
  rr::Comm comm = rr::Comm::from_env();
  const int n = comm.size(), me = comm.rank();
  std::vector<double> v(1000, me + 1.0);
  comm.all_reduce(v);
  EXPECT_EQ(v[999], n * (n + 1) / 2.0);
  // With a per-call config: its own schedule and timeout.
  rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
  config.timeout_ms = 30000;
  config.algorithm = "rd";
  std::vector<int32_t> w(33, me);
  comm.all_reduce(w, rrSum, &config);
  EXPECT_EQ(w[32], n * (n - 1) / 2);
  config.algorithm = nullptr;  // a schedule is an allreduce's only (FailuresThrowWithCodeAndMessage)
  comm.barrier(&config);

  std::vector<int64_t> b(10, me == n - 1 ? 42 : 0);
  comm.broadcast(b, n - 1);
  EXPECT_EQ(b[9], 42);
  std::vector<int32_t> mine = {me, me * 10};
  std::vector<int32_t> all = comm.all_gather(mine);
  ASSERT_EQ(all.size(), 2u * n);
  for (int r = 0; r < n; ++r) EXPECT_EQ(all[2 * r + 1], r * 10);
  std::vector<float> blocks(static_cast<size_t>(n) * 3, 1.0f);
  std::vector<float> part = comm.reduce_scatter(blocks);
  ASSERT_EQ(part.size(), 3u);
  EXPECT_EQ(part[2], static_cast<float>(n));
  std::vector<uint64_t> total(4, 0);
  comm.reduce(std::vector<uint64_t>(4, 2), total, 0);
  if (me == 0) {
    EXPECT_EQ(total[3], 2u * n);
  }
  rr::Comm half = comm.split(me % 2, me);
  ASSERT_TRUE(half);
  EXPECT_EQ(half.size(), (n + 1 - me % 2) / 2);
  half.barrier();
  rr::Comm none = comm.split(RR_SPLIT_NOCOLOR, 0);
  EXPECT_FALSE(none);
  comm.barrier();
  // The timeout set is the one read back, and a split child starts from it.
  comm.set_timeout(std::chrono::milliseconds(45000));
  EXPECT_EQ(comm.timeout(), std::chrono::milliseconds(45000));
  rr::Comm again = comm.split(0, me);
  EXPECT_EQ(again.timeout(), std::chrono::milliseconds(45000));
  again.barrier();
  // Revoked, every call throws rrRevoked; the ranks but the last shrink it
  // away (all alive: the last one simply does not call) and go on.
  again.revoke();
  try {
    again.barrier();
    FAIL() << "a call on a revoked communicator must throw";
  } catch (const rr::Error& e) {
    EXPECT_EQ(e.result(), rrRevoked) << e.what();
  }
  if (me != n - 1) {
    rr::Comm rest = again.shrink({n - 1});
    ASSERT_TRUE(rest);
    EXPECT_EQ(rest.size(), n - 1);
    EXPECT_EQ(rest.rank(), me);
    std::vector<int32_t> sum(2, me + 1);
    rest.all_reduce(sum);
    EXPECT_EQ(sum[1], (n - 1) * n / 2);
  }
}

TEST(Wrapper, FailuresThrowWithCodeAndMessage) {
  rr::Comm comm = rr::Comm::from_env();
  std::vector<int32_t> v(3);
  try {
    comm.broadcast(v, comm.size());
    FAIL() << "a root out of range must throw";
  } catch (const rr::Error& e) {
    EXPECT_EQ(e.result(), rrInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("root="), std::string::npos) << e.what();
  }
  try {
    rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
    config.algorithm = "rd";
    comm.barrier(&config);
    FAIL() << "an algorithm on a barrier must throw";
  } catch (const rr::Error& e) {
    EXPECT_EQ(e.result(), rrInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("config->algorithm=\"rd\""), std::string::npos) << e.what();
  }
  try {
    comm.set_timeout(std::chrono::milliseconds(0));
    FAIL() << "a timeout of 0 ms must throw";
  } catch (const rr::Error& e) {
    EXPECT_EQ(e.result(), rrInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("timeout_ms=0"), std::string::npos) << e.what();
  }
}

}  // namespace
