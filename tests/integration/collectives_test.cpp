// Multi-process collectives over UCX (allreduce, reduce-scatter, all-gather,
// broadcast, reduce, gather, scatter, all-to-all, barrier, send/recv). The
// bitwise ops, rrAllToAllv and tagged point-to-point have files of their own
// in the same binary (collectives_env.hpp).
// Every rank runs this binary under rr-run (env:// variables set) and every
// rank runs the same tests in the same order, so each TEST is one collective
// conversation.
//
// Inputs are random but reproducible: every rank can generate every rank's
// input, so each checks its result against a reference computed in double
// (exact integer arithmetic, with the wrap-around of the type, for integers).

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "collectives_env.hpp"
#include "collectives_reference.hpp"
#include "shared_check.hpp"

// Counts every C++ allocation in the process, the library's included: the
// data path must make none.
static std::atomic<uint64_t> g_allocations{0};
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that the matching operator new above allocates with malloc.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
// Every other form goes through the same pair, so allocation and release
// always match (std::stable_sort's buffer uses the nothrow form).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void* operator new[](size_t n) { return operator new(n); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace collectives_env {
rrComm_t g_comm = nullptr;
rrComm_t g_small_comm = nullptr;
int g_rank = 0;
int g_size = 1;
}  // namespace collectives_env

namespace {

using namespace collectives_env;
using namespace collectives_reference;

class CommEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(rrCommInitFromEnv(&g_comm), rrSuccess) << rrGetLastError(nullptr);
    ASSERT_EQ(rrCommUserRank(g_comm, &g_rank), rrSuccess);
    ASSERT_EQ(rrCommCount(g_comm, &g_size), rrSuccess);
    shared_check::begin(g_rank, g_size);
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    config.chunk_bytes = 96;  // odd on purpose: chunks cut elements of 8 bytes into 12
    config.pipeline_depth = 3;
    ASSERT_EQ(rrCommInitUrl(&g_small_comm, "env://", -1, -1, &config), rrSuccess) << rrGetLastError(nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(rrCommDestroy(g_small_comm), rrSuccess);
    EXPECT_EQ(rrCommDestroy(g_comm), rrSuccess);
    shared_check::end();
  }
};

struct Case {
  rrDataType_t dtype;
  rrRedOp_t op;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(type_name(info.param.dtype)) + "_" + op_name(info.param.op);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (auto t : kTypes)
    for (auto o : kOps) cases.push_back({t, o});
  return cases;
}

// Runs one allreduce of `count` elements on `comm` and checks every element.
void check_allreduce(rrComm_t comm, rrDataType_t t, rrRedOp_t op, size_t count, bool in_place, uint64_t seed) {
  SCOPED_TRACE(std::string(type_name(t)) + " " + op_name(op) + " count=" + std::to_string(count) +
               (in_place ? " in place" : " out of place") + " ranks=" + std::to_string(g_size));
  const size_t bytes = count * type_size(t);
  // One guard element past the end catches a write beyond count.
  std::vector<uint8_t> send(bytes + 8, 0xAB), recv(bytes + 8, 0xCD);
  fill_input(t, op, g_rank, seed, send.data(), 0, count);
  const std::vector<uint8_t> original = send;
  void* out = in_place ? send.data() : recv.data();
  ASSERT_EQ(rrAllReduce(send.data(), out, count, t, op, comm, nullptr), rrSuccess) << rrGetLastError(comm);

  if (!in_place) {
    EXPECT_EQ(send, original) << "the send buffer was modified";
  }
  const uint8_t* guard = static_cast<uint8_t*>(out) + bytes;
  for (int k = 0; k < 8; ++k) ASSERT_EQ(guard[k], in_place ? 0xAB : 0xCD) << "wrote past count";
  // Every rank's result is the same: checked once per job (shared_check.hpp).
  const size_t elem = type_size(t);
  shared_check::check_replicated(out, count, elem,
      std::string("allreduce ") + type_name(t) + " " + op_name(op) + " " + std::to_string(count) + " " +
          std::to_string(seed) + (in_place ? " in place" : ""),
      [&](size_t first, size_t n) {
        return check_reduced(t, op, static_cast<const uint8_t*>(out) + first * elem, first, n, seed);
      });
}

// Reduce-scatter of N blocks of `count`: rank r gets block r reduced.
void check_reduce_scatter(rrComm_t comm, rrDataType_t t, rrRedOp_t op, size_t count, bool in_place, uint64_t seed) {
  SCOPED_TRACE(std::string("reduce-scatter ") + type_name(t) + " " + op_name(op) + " recvcount=" +
               std::to_string(count) + (in_place ? " in place" : " out of place") + " ranks=" + std::to_string(g_size));
  const size_t total = count * static_cast<size_t>(g_size);
  const size_t elem = type_size(t);
  std::vector<uint8_t> send(total * elem + 8, 0xAB), recv(count * elem + 8, 0xCD);
  fill_input(t, op, g_rank, seed, send.data(), 0, total);
  const std::vector<uint8_t> original = send;
  void* out = in_place ? send.data() + static_cast<size_t>(g_rank) * count * elem : recv.data();
  ASSERT_EQ(rrReduceScatter(send.data(), out, count, t, op, comm, nullptr), rrSuccess) << rrGetLastError(comm);
  if (!in_place) {
    EXPECT_EQ(send, original) << "the send buffer was modified";
    for (int k = 0; k < 8; ++k) ASSERT_EQ(recv[count * elem + static_cast<size_t>(k)], 0xCD) << "wrote past recvcount";
  }
  check_reduced(t, op, out, static_cast<size_t>(g_rank) * count, count, seed);
}

// All-gather of `count` elements per rank.
void check_all_gather(rrComm_t comm, rrDataType_t t, size_t count, bool in_place, uint64_t seed) {
  SCOPED_TRACE(std::string("all-gather ") + type_name(t) + " sendcount=" + std::to_string(count) +
               (in_place ? " in place" : " out of place") + " ranks=" + std::to_string(g_size));
  const size_t elem = type_size(t);
  std::vector<uint8_t> send(count * elem + 8, 0xAB), recv(count * elem * static_cast<size_t>(g_size) + 8, 0xCD);
  uint8_t* mine = in_place ? recv.data() + static_cast<size_t>(g_rank) * count * elem : send.data();
  fill_input(t, rrSum, g_rank, seed, mine, 0, count);
  ASSERT_EQ(rrAllGather(mine, recv.data(), count, t, comm, nullptr), rrSuccess) << rrGetLastError(comm);
  // Every rank's result is the same: checked once per job (shared_check.hpp),
  // element j being element j % count of block j / count.
  shared_check::check_replicated(recv.data(), count * static_cast<size_t>(g_size), elem,
      std::string("all-gather ") + type_name(t) + " " + std::to_string(count) + " " + std::to_string(seed) +
          (in_place ? " in place" : ""),
      [&](size_t first, size_t n) {
        bool right = true;
        for (size_t j = first; j < first + n;) {  // the part of each block in [first, first + n)
          const size_t r = j / count, i = j % count, len = std::min(count - i, first + n - j);
          right &= check_input(t, rrSum, static_cast<int>(r), seed, recv.data() + j * elem, i, len,
                               "block " + std::to_string(r));
          j += len;
        }
        return right;
      });
  for (int k = 0; k < 8; ++k) ASSERT_EQ(recv[count * elem * static_cast<size_t>(g_size) + static_cast<size_t>(k)], 0xCD);
}

class AllReduceEveryTypeAndOp : public ::testing::TestWithParam<Case> {};

TEST_P(AllReduceEveryTypeAndOp, MatchesDoubleReference) {
  const Case c = GetParam();
  const size_t n = static_cast<size_t>(g_size);
  uint64_t seed = static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  // Zero, one, fewer than the ranks, not divisible, a prime, many chunks.
  for (size_t count : {size_t{0}, size_t{1}, n - 1, n + 1, size_t{2} * n + 3, size_t{101}, size_t{1031}}) {
    for (bool in_place : {false, true}) {
      check_allreduce(g_small_comm, c.dtype, c.op, count, in_place, ++seed);
    }
  }
}

// Several default-size chunks per segment. A test of its own: its reference
// costs ranks x count per rank, so the 8-rank suites pick their cases
// (tests/integration/meson.build).
TEST_P(AllReduceEveryTypeAndOp, ManyDefaultChunks) {
  const Case c = GetParam();
  const size_t n = static_cast<size_t>(g_size);
  const uint64_t seed = static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op) + 1000;
  check_allreduce(g_comm, c.dtype, c.op, (size_t{3} << 20) / type_size(c.dtype) * n + 7, false, seed);
}

INSTANTIATE_TEST_SUITE_P(Ucx, AllReduceEveryTypeAndOp, ::testing::ValuesIn(all_cases()), case_name);

class ReduceScatterEveryTypeAndOp : public ::testing::TestWithParam<Case> {};

TEST_P(ReduceScatterEveryTypeAndOp, MatchesDoubleReference) {
  const Case c = GetParam();
  uint64_t seed = 1000 + static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{257}}) {
    for (bool in_place : {false, true}) check_reduce_scatter(g_small_comm, c.dtype, c.op, count, in_place, ++seed);
  }
  check_reduce_scatter(g_comm, c.dtype, c.op, (size_t{2} << 20) / type_size(c.dtype) + 3, false, ++seed);
}

INSTANTIATE_TEST_SUITE_P(Ucx, ReduceScatterEveryTypeAndOp, ::testing::ValuesIn(all_cases()), case_name);

class AllGatherEveryType : public ::testing::TestWithParam<rrDataType_t> {};

TEST_P(AllGatherEveryType, EveryBlockArrives) {
  const rrDataType_t t = GetParam();
  uint64_t seed = 2000 + static_cast<uint64_t>(t) * 16;
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{257}}) {
    for (bool in_place : {false, true}) check_all_gather(g_small_comm, t, count, in_place, ++seed);
  }
  check_all_gather(g_comm, t, (size_t{2} << 20) / type_size(t) + 3, false, ++seed);
}

INSTANTIATE_TEST_SUITE_P(Ucx, AllGatherEveryType, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<rrDataType_t>& info) { return std::string(type_name(info.param)); });

TEST(AllReduce, RepeatedCallsAllocateNothing) {
  const size_t count = (size_t{32} << 20) / sizeof(float) + 13;
  std::vector<float> send(count, 2.0f), recv(count);
  ASSERT_EQ(rrAllReduce(send.data(), recv.data(), count, rrFloat32, rrSum, g_comm, nullptr), rrSuccess);
  size_t pool_before = 0;
  uint64_t pool_allocs_before = 0;
  ASSERT_EQ(rrCommGetPoolStats(g_comm, &pool_before, &pool_allocs_before), rrSuccess);
  const uint64_t news_before = g_allocations.load();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(rrAllReduce(send.data(), recv.data(), count, rrFloat32, rrSum, g_comm, nullptr), rrSuccess);
    ASSERT_EQ(rrAllReduce(recv.data(), recv.data(), count, rrFloat32, rrMax, g_comm, nullptr), rrSuccess);
  }
  const uint64_t news_after = g_allocations.load();
  size_t pool_after = 0;
  uint64_t pool_allocs_after = 0;
  ASSERT_EQ(rrCommGetPoolStats(g_comm, &pool_after, &pool_allocs_after), rrSuccess);
  EXPECT_EQ(news_after, news_before) << "C++ allocations on the data path";
  EXPECT_EQ(pool_allocs_after, pool_allocs_before);
  EXPECT_EQ(pool_after, pool_before);
  EXPECT_EQ(recv[count - 1], 2.0f * g_size);
  // O(chunk x depth), not O(count): a tensor twice as large leaves the pool
  // as it was. (Not a bound in bytes: the depth is sized from the measured
  // round trip, which a loaded machine stretches across fake hosts.)
  std::vector<float> twice(2 * count, 1.0f);
  ASSERT_EQ(rrAllReduce(twice.data(), twice.data(), twice.size(), rrFloat32, rrSum, g_comm, nullptr), rrSuccess);
  size_t pool_twice = 0;
  uint64_t pool_allocs_twice = 0;
  ASSERT_EQ(rrCommGetPoolStats(g_comm, &pool_twice, &pool_allocs_twice), rrSuccess);
  EXPECT_EQ(pool_twice, pool_before);
  EXPECT_EQ(pool_allocs_twice, pool_allocs_before);
  EXPECT_EQ(twice[2 * count - 1], 1.0f * g_size);
}

TEST(AllReduce, BadArgumentsNameTheArgument) {
  float x = 1;
  EXPECT_EQ(rrAllReduce(nullptr, &x, 1, rrFloat32, rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("sendbuff"), std::string::npos);
  EXPECT_EQ(rrAllReduce(&x, nullptr, 1, rrFloat32, rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("recvbuff"), std::string::npos);
  EXPECT_EQ(rrAllReduce(&x, &x, 1, static_cast<rrDataType_t>(42), rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("datatype=42"), std::string::npos);
  EXPECT_EQ(rrAllReduce(&x, &x, 1, rrFloat32, static_cast<rrRedOp_t>(-1), g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("op=-1"), std::string::npos);
  EXPECT_EQ(rrAllReduce(&x, &x, 1, rrFloat32, rrSum, nullptr, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("comm"), std::string::npos);
  float pair[2] = {1, 2};
  EXPECT_EQ(rrAllReduce(pair, pair + 1, 2, rrFloat32, rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("overlap"), std::string::npos);
  // NULL buffers with count 0 are fine, as in NCCL.
  EXPECT_EQ(rrAllReduce(nullptr, nullptr, 0, rrFloat32, rrSum, g_comm, nullptr), rrSuccess);
  // The communicator still works after rejected calls.
  float y = 1;
  ASSERT_EQ(rrAllReduce(&y, &y, 1, rrFloat32, rrSum, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(y, static_cast<float>(g_size));
}

// The roots every rooted collective is tried with: the first and the last rank.
std::vector<int> roots() {
  std::vector<int> r = {0};
  if (g_size > 1) r.push_back(g_size - 1);
  return r;
}

class BroadcastEveryType : public ::testing::TestWithParam<rrDataType_t> {};

TEST_P(BroadcastEveryType, EveryRankGetsTheRootsData) {
  const rrDataType_t t = GetParam();
  const size_t elem = type_size(t);
  uint64_t seed = 3000 + static_cast<uint64_t>(t) * 16;
  for (int root : roots()) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}, (size_t{3} << 20) / elem + 5}) {
      for (bool in_place : {false, true}) {
        ++seed;
        rrComm_t comm = count > 2000 ? g_comm : g_small_comm;
        SCOPED_TRACE("broadcast " + std::string(type_name(t)) + " root=" + std::to_string(root) + " count=" +
                     std::to_string(count) + (in_place ? " in place" : ""));
        std::vector<uint8_t> send(count * elem + 1, 0xAB), recv(count * elem + 8, 0xCD);
        if (g_rank == root) {
          uint8_t* src = in_place ? recv.data() : send.data();
          fill_input(t, rrSum, root, seed, src, 0, count);
        }
        const void* src = g_rank != root ? nullptr : in_place ? recv.data() : send.data();
        ASSERT_EQ(rrBroadcast(src, recv.data(), count, t, root, comm, nullptr), rrSuccess) << rrGetLastError(comm);
        check_input(t, rrSum, root, seed, recv.data(), 0, count, "broadcast");
        for (int k = 0; k < 8; ++k) ASSERT_EQ(recv[count * elem + static_cast<size_t>(k)], 0xCD) << "wrote past count";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, BroadcastEveryType, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<rrDataType_t>& info) { return std::string(type_name(info.param)); });

class ReduceEveryTypeAndOp : public ::testing::TestWithParam<Case> {};

TEST_P(ReduceEveryTypeAndOp, RootGetsTheReductionOthersAreUntouched) {
  const Case c = GetParam();
  const size_t elem = type_size(c.dtype);
  uint64_t seed = 4000 + static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  for (int root : roots()) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}, (size_t{2} << 20) / elem + 5}) {
      ++seed;
      rrComm_t comm = count > 2000 ? g_comm : g_small_comm;
      SCOPED_TRACE("reduce " + std::string(type_name(c.dtype)) + " " + op_name(c.op) + " root=" + std::to_string(root) +
                   " count=" + std::to_string(count));
      std::vector<uint8_t> send(count * elem + 1), recv(count * elem + 8, 0xCD);
      fill_input(c.dtype, c.op, g_rank, seed, send.data(), 0, count);
      const std::vector<uint8_t> original = send;
      ASSERT_EQ(rrReduce(send.data(), recv.data(), count, c.dtype, c.op, root, comm, nullptr), rrSuccess)
          << rrGetLastError(comm);
      EXPECT_EQ(send, original) << "the send buffer was modified";
      if (g_rank == root) {
        check_reduced(c.dtype, c.op, recv.data(), 0, count, seed);
      } else {
        for (uint8_t b : recv) ASSERT_EQ(b, 0xCD) << "a non-root's recvbuff was written";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, ReduceEveryTypeAndOp, ::testing::ValuesIn(all_cases()), case_name);

class GatherScatterAllToAll : public ::testing::TestWithParam<rrDataType_t> {};

TEST_P(GatherScatterAllToAll, BlocksLandWhereTheyBelong) {
  const rrDataType_t t = GetParam();
  const size_t elem = type_size(t);
  const size_t n = static_cast<size_t>(g_size);
  uint64_t seed = 5000 + static_cast<uint64_t>(t) * 16;
  // Value of element i of the block rank `from` sends to rank `to`.
  auto value = [&](int from, int to, size_t i) { return input_value(t, rrSum, from * 64 + to, i, seed); };
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    ++seed;
    for (int root : roots()) {
      SCOPED_TRACE("gather/scatter " + std::string(type_name(t)) + " root=" + std::to_string(root) + " count=" + std::to_string(count));
      // Gather: rank r's block r ends up at the root.
      std::vector<uint8_t> mine(count * elem + 1), all(n * count * elem + 1, 0xCD);
      for (size_t i = 0; i < count; ++i) store(t, mine.data(), i, value(g_rank, root, i));
      ASSERT_EQ(rrGather(mine.data(), all.data(), count, t, root, g_small_comm, nullptr), rrSuccess) << rrGetLastError(g_small_comm);
      if (g_rank == root) {
        for (int r = 0; r < g_size; ++r)
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(load(t, all.data(), static_cast<size_t>(r) * count + i), value(r, root, i)) << "block " << r;
      }
      // Scatter: the root's block r ends up at rank r.
      std::vector<uint8_t> blocks(n * count * elem + 1), got(count * elem + 8, 0xCD);
      if (g_rank == root) {
        for (int r = 0; r < g_size; ++r)
          for (size_t i = 0; i < count; ++i) store(t, blocks.data(), static_cast<size_t>(r) * count + i, value(root, r, i));
      }
      ASSERT_EQ(rrScatter(blocks.data(), got.data(), count, t, root, g_small_comm, nullptr), rrSuccess) << rrGetLastError(g_small_comm);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(load(t, got.data(), i), value(root, g_rank, i));
      for (int k = 0; k < 8; ++k) ASSERT_EQ(got[count * elem + static_cast<size_t>(k)], 0xCD);
    }
    // All-to-all: rank p's block r ends up at rank r's block p.
    std::vector<uint8_t> out(n * count * elem + 1), in(n * count * elem + 8, 0xCD);
    for (int r = 0; r < g_size; ++r)
      for (size_t i = 0; i < count; ++i) store(t, out.data(), static_cast<size_t>(r) * count + i, value(g_rank, r, i));
    ASSERT_EQ(rrAllToAll(out.data(), in.data(), count, t, g_small_comm, nullptr), rrSuccess) << rrGetLastError(g_small_comm);
    for (int p = 0; p < g_size; ++p)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(load(t, in.data(), static_cast<size_t>(p) * count + i), value(p, g_rank, i)) << "from " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, GatherScatterAllToAll, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<rrDataType_t>& info) { return std::string(type_name(info.param)); });

TEST(Barrier, NoRankLeavesBeforeAllArrived) {
  // Each rank leaves a marker file, then waits at the barrier; after it,
  // every marker must exist. The rank with the most work arrives last.
  const std::string dir = "/tmp/rr-barrier-" + std::string(std::getenv("MASTER_PORT") ? std::getenv("MASTER_PORT") : "0");
  for (int round = 0; round < 3; ++round) {
    if (g_rank == 0) mkdir(dir.c_str(), 0700);
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    volatile double spin = 0;
    for (int i = 0; i < 200000 * (g_rank + 1); ++i) spin = spin + i;  // arrive at different times
    const std::string marker = dir + "/" + std::to_string(round) + "-" + std::to_string(g_rank);
    FILE* f = std::fopen(marker.c_str(), "w");
    ASSERT_NE(f, nullptr) << marker;
    std::fclose(f);
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    for (int r = 0; r < g_size; ++r) {
      const std::string theirs = dir + "/" + std::to_string(round) + "-" + std::to_string(r);
      EXPECT_EQ(access(theirs.c_str(), F_OK), 0) << "rank " << r << " had not arrived: " << theirs;
    }
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
    unlink(marker.c_str());
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
    if (g_rank == 0) rmdir(dir.c_str());
  }
}

TEST(SendRecv, GroupedRingShiftEveryType) {
  // Every rank sends to its right and receives from its left at once: only
  // a group can do that without deadlock.
  for (rrDataType_t t : kTypes) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, (size_t{1} << 20) + 3}) {
      const size_t elem = type_size(t);
      const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
      std::vector<uint8_t> out(count * elem + 1), in(count * elem + 1);
      fill_input(t, rrSum, g_rank, 77, out.data(), 0, count);
      ASSERT_EQ(rrGroupStart(), rrSuccess);
      ASSERT_EQ(rrSend(out.data(), count, t, right, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
      ASSERT_EQ(rrRecv(in.data(), count, t, left, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
      ASSERT_EQ(rrGroupEnd(), rrSuccess) << rrGetLastError(g_comm);
      ASSERT_TRUE(check_input(t, rrSum, left, 77, in.data(), 0, count, type_name(t)));
    }
  }
}

TEST(SendRecv, BlockingPairsArriveInOrder) {
  // Ranks pair up (0-1, 2-3, ...); the lower sends five messages, the higher
  // receives them in the order sent, then they swap roles.
  const int partner = g_rank % 2 == 0 ? g_rank + 1 : g_rank - 1;
  if (partner >= g_size) GTEST_SKIP() << "rank " << g_rank << " has no partner";
  for (int phase = 0; phase < 2; ++phase) {
    const bool sender = (g_rank % 2 == 0) == (phase == 0);
    for (int m = 0; m < 5; ++m) {
      std::vector<int64_t> msg(1000 + static_cast<size_t>(m) * 100000);
      if (sender) {
        for (size_t i = 0; i < msg.size(); ++i) msg[i] = m * 1000003 + static_cast<int64_t>(i);
        ASSERT_EQ(rrSend(msg.data(), msg.size(), rrInt64, partner, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
      } else {
        ASSERT_EQ(rrRecv(msg.data(), msg.size(), rrInt64, partner, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
        for (size_t i = 0; i < msg.size(); ++i) ASSERT_EQ(msg[i], m * 1000003 + static_cast<int64_t>(i)) << "message " << m;
      }
    }
  }
}

TEST(SendRecv, SelfSendInsideAGroup) {
  std::vector<float> out(100, static_cast<float>(g_rank)), in(100, -1.0f);
  ASSERT_EQ(rrGroupStart(), rrSuccess);
  ASSERT_EQ(rrRecv(in.data(), in.size(), rrFloat32, g_rank, g_comm, nullptr), rrSuccess);
  ASSERT_EQ(rrSend(out.data(), out.size(), rrFloat32, g_rank, g_comm, nullptr), rrSuccess);
  ASSERT_EQ(rrGroupEnd(), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(in, out);
  float x = 0;
  EXPECT_EQ(rrSend(&x, 1, rrFloat32, g_rank, g_comm, nullptr), rrInvalidUsage);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("itself"), std::string::npos) << rrGetLastError(g_comm);
}

TEST(Collectives, BadRootsAndPeersAreNamedOnEveryRank) {
  float x = 0, y = 0;
  EXPECT_EQ(rrBroadcast(&x, &y, 1, rrFloat32, g_size, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("root=" + std::to_string(g_size)), std::string::npos);
  EXPECT_EQ(rrReduce(&x, &y, 1, rrFloat32, rrSum, -1, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("root=-1"), std::string::npos);
  EXPECT_EQ(rrGather(&x, &y, 1, rrFloat32, g_size + 3, g_comm, nullptr), rrInvalidArgument);
  EXPECT_EQ(rrScatter(&x, &y, 1, rrFloat32, -2, g_comm, nullptr), rrInvalidArgument);
  EXPECT_EQ(rrSend(&x, 1, rrFloat32, g_size, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("peer=" + std::to_string(g_size)), std::string::npos);
  EXPECT_EQ(rrRecv(&x, 1, rrFloat32, -1, g_comm, nullptr), rrInvalidArgument);
  EXPECT_EQ(rrGroupEnd(), rrInvalidUsage);
  // In a group, where nothing is posted until rrGroupEnd, and to itself.
  ASSERT_EQ(rrGroupStart(), rrSuccess);
  EXPECT_EQ(rrSend(&x, 1, rrFloat32, g_size, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("rrSend: peer=" + std::to_string(g_size)), std::string::npos)
      << rrGetLastError(g_comm);
  EXPECT_EQ(rrRecv(&x, 1, rrFloat32, -3, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("rrRecv: peer=-3"), std::string::npos) << rrGetLastError(g_comm);
  EXPECT_EQ(rrGroupEnd(), rrSuccess) << rrGetLastError(g_comm);
  std::vector<float> both(4 * static_cast<size_t>(g_size));
  EXPECT_EQ(rrAllToAll(both.data(), both.data() + 1, 2, rrFloat32, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("overlap"), std::string::npos);
  // recvbuff inside sendbuff but not at block `rank`: neither in place nor apart.
  EXPECT_EQ(rrReduceScatter(both.data(), both.data() + 1, 2, rrFloat32, rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("in place"), std::string::npos);
  // Still usable afterwards: nothing was sent.
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
}

TEST(CommSplit, EvenAndOddRanksReversedByKey) {
  // Colors: parity of the rank; the last rank of 3 or more opts out. Keys
  // reverse the order, so new rank 0 is the highest parent rank of its color.
  const bool opts_out = g_size >= 3 && g_rank == g_size - 1;
  const int color = opts_out ? RR_SPLIT_NOCOLOR : g_rank % 2;
  rrComm_t sub = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, color, -g_rank, &sub, nullptr), rrSuccess) << rrGetLastError(g_comm);
  if (opts_out) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = g_size - 1; r >= 0; --r) {
    if (r % 2 == color && !(g_size >= 3 && r == g_size - 1)) members.push_back(r);
  }
  int size = 0, rank = -1;
  ASSERT_EQ(rrCommCount(sub, &size), rrSuccess);
  ASSERT_EQ(rrCommUserRank(sub, &rank), rrSuccess);
  EXPECT_EQ(size, static_cast<int>(members.size()));
  ASSERT_GE(rank, 0);
  EXPECT_EQ(members[static_cast<size_t>(rank)], g_rank);
  // Every collective works on the sub-communicator.
  std::vector<int64_t> v(1001, g_rank + 1);
  ASSERT_EQ(rrAllReduce(v.data(), v.data(), v.size(), rrInt64, rrSum, sub, nullptr), rrSuccess) << rrGetLastError(sub);
  int64_t expect = 0;
  for (int m : members) expect += m + 1;
  for (int64_t x : v) ASSERT_EQ(x, expect);
  std::vector<int32_t> ranks(static_cast<size_t>(size));
  const int32_t me = g_rank;
  ASSERT_EQ(rrAllGather(&me, ranks.data(), 1, rrInt32, sub, nullptr), rrSuccess);
  for (int i = 0; i < size; ++i) EXPECT_EQ(ranks[static_cast<size_t>(i)], members[static_cast<size_t>(i)]);
  int32_t from_root = g_rank;
  ASSERT_EQ(rrBroadcast(&from_root, &from_root, 1, rrInt32, size - 1, sub, nullptr), rrSuccess);
  EXPECT_EQ(from_root, members.back());
  ASSERT_EQ(rrBarrier(sub, nullptr), rrSuccess);
  EXPECT_EQ(rrCommDestroy(sub), rrSuccess);
}

TEST(CommSplit, ParentAndChildRunConcurrentlyWithoutCrosstalk) {
  // One thread drives the whole-world communicator while another drives a
  // split of it; both carry different data at once.
  rrComm_t sub = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &sub, nullptr), rrSuccess) << rrGetLastError(g_comm);
  const size_t count = (size_t{1} << 18) + 5;
  std::vector<float> parent_data(count), child_data(count);
  bool child_ok = true;
  std::thread child([&] {
    for (int i = 0; i < 20 && child_ok; ++i) {
      std::fill(child_data.begin(), child_data.end(), 2.0f);
      child_ok = rrAllReduce(child_data.data(), child_data.data(), count, rrFloat32, rrSum, sub, nullptr) == rrSuccess &&
                 child_data[count / 2] == 2.0f * g_size;
    }
  });
  for (int i = 0; i < 20; ++i) {
    std::fill(parent_data.begin(), parent_data.end(), 1.0f);
    ASSERT_EQ(rrAllReduce(parent_data.data(), parent_data.data(), count, rrFloat32, rrMax, g_comm, nullptr), rrSuccess)
        << rrGetLastError(g_comm);
    ASSERT_EQ(parent_data[count - 1], 1.0f);
  }
  child.join();
  EXPECT_TRUE(child_ok) << rrGetLastError(sub);
  for (float x : child_data) ASSERT_EQ(x, 2.0f * g_size);
  EXPECT_EQ(rrCommDestroy(sub), rrSuccess);
}

TEST(NonBlocking, ManyOutstandingRequestsWaitedInReverseOrder) {
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  constexpr int kMessages = 16;
  std::vector<std::vector<int32_t>> out(kMessages), in(kMessages);
  std::vector<rrRequest_t> requests;
  for (int m = 0; m < kMessages; ++m) {
    const size_t count = 1 + static_cast<size_t>(m) * 20011;  // eager and rendezvous sizes mixed
    out[m].assign(count, g_rank * 1000 + m);
    in[m].assign(count, -1);
    rrRequest_t r = nullptr;
    ASSERT_EQ(rrIrecv(in[m].data(), count, rrInt32, left, g_comm, &r), rrSuccess) << rrGetLastError(g_comm);
    requests.push_back(r);
    ASSERT_EQ(rrIsend(out[m].data(), count, rrInt32, right, g_comm, &r), rrSuccess) << rrGetLastError(g_comm);
    requests.push_back(r);
  }
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    ASSERT_EQ(rrWait(*it), rrSuccess) << rrGetLastError(g_comm);
  }
  for (int m = 0; m < kMessages; ++m) {
    for (int32_t x : in[m]) ASSERT_EQ(x, left * 1000 + m) << "message " << m << " arrived out of order or wrong";
  }
}

TEST(NonBlocking, TestPollsUntilDoneThenTheHandleIsGone) {
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  std::vector<double> out(50000, g_rank + 0.5), in(50000);
  rrRequest_t recv = nullptr, send = nullptr;
  ASSERT_EQ(rrIrecv(in.data(), in.size(), rrFloat64, left, g_comm, &recv), rrSuccess);
  ASSERT_EQ(rrIsend(out.data(), out.size(), rrFloat64, right, g_comm, &send), rrSuccess);
  int done = 0;
  while (!done) ASSERT_EQ(rrTest(recv, &done), rrSuccess) << rrGetLastError(g_comm);
  ASSERT_EQ(rrWait(send), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(in[49999], left + 0.5);
  // Both handles are finished now: using them again is refused, not followed.
  EXPECT_EQ(rrWait(recv), rrInvalidUsage);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("not in flight"), std::string::npos) << rrGetLastError(nullptr);
  EXPECT_EQ(rrTest(send, &done), rrInvalidUsage);
  EXPECT_EQ(rrWait(nullptr), rrInvalidUsage);
}

TEST(NonBlocking, ReceiveSmallerThanTheMessageIsAnError) {
  if (g_size < 2) GTEST_SKIP() << "needs two ranks";
  if (g_rank > 1) return;
  std::vector<int8_t> big(64, 7), small(16);
  if (g_rank == 0) {
    ASSERT_EQ(rrSend(big.data(), big.size(), rrInt8, 1, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  } else {
    rrRequest_t r = nullptr;
    ASSERT_EQ(rrIrecv(small.data(), small.size(), rrInt8, 0, g_comm, &r), rrSuccess);
    EXPECT_EQ(rrWait(r), rrRemoteError);
    const std::string error = rrGetLastError(g_comm);
    EXPECT_NE(error.find("receive of 16 bytes from rank 0"), std::string::npos) << error;
  }
}

TEST(AsyncCollectives, ManyInFlightWaitedInAnyOrder) {
  // Eight allreduces, a broadcast, an all-gather and a reduce-scatter in
  // flight at once; waited in reverse, then in an interleaved order.
  for (int round = 0; round < 2; ++round) {
    constexpr int kReduces = 8;
    std::vector<std::vector<int64_t>> sums(kReduces);
    std::vector<rrRequest_t> requests;
    for (int k = 0; k < kReduces; ++k) {
      sums[k].assign(1000 + static_cast<size_t>(k) * 30011, g_rank + k);
      rrRequest_t r = nullptr;
      ASSERT_EQ(rrAllReduceAsync(sums[k].data(), sums[k].data(), sums[k].size(), rrInt64, rrSum, g_comm, &r), rrSuccess)
          << rrGetLastError(g_comm);
      requests.push_back(r);
    }
    int32_t word = g_rank == g_size - 1 ? 4242 : 0;
    rrRequest_t r = nullptr;
    ASSERT_EQ(rrBroadcastAsync(&word, &word, 1, rrInt32, g_size - 1, g_comm, &r), rrSuccess);
    requests.push_back(r);
    std::vector<int32_t> ranks(static_cast<size_t>(g_size));
    const int32_t me = g_rank;
    ASSERT_EQ(rrAllGatherAsync(&me, ranks.data(), 1, rrInt32, g_comm, &r), rrSuccess);
    requests.push_back(r);
    std::vector<float> blocks(static_cast<size_t>(g_size) * 3, 1.0f), mine(3);
    ASSERT_EQ(rrReduceScatterAsync(blocks.data(), mine.data(), 3, rrFloat32, rrSum, g_comm, &r), rrSuccess);
    requests.push_back(r);
    if (round == 0) {
      for (auto it = requests.rbegin(); it != requests.rend(); ++it) ASSERT_EQ(rrWait(*it), rrSuccess) << rrGetLastError(g_comm);
    } else {
      for (size_t i = 1; i < requests.size(); i += 2) ASSERT_EQ(rrWait(requests[i]), rrSuccess) << rrGetLastError(g_comm);
      for (size_t i = 0; i < requests.size(); i += 2) ASSERT_EQ(rrWait(requests[i]), rrSuccess) << rrGetLastError(g_comm);
    }
    for (int k = 0; k < kReduces; ++k) {
      const int64_t expect = static_cast<int64_t>(g_size) * (g_size - 1) / 2 + static_cast<int64_t>(g_size) * k;
      for (int64_t x : sums[k]) ASSERT_EQ(x, expect) << "allreduce " << k;
    }
    EXPECT_EQ(word, 4242);
    for (int i = 0; i < g_size; ++i) EXPECT_EQ(ranks[static_cast<size_t>(i)], i);
    for (float x : mine) EXPECT_EQ(x, static_cast<float>(g_size));
  }
}

TEST(AsyncCollectives, BlockingCallsRunAfterQueuedOnesAndTestPolls) {
  std::vector<double> first(200003, 1.0), second(7, 2.0);
  rrRequest_t r = nullptr;
  ASSERT_EQ(rrAllReduceAsync(first.data(), first.data(), first.size(), rrFloat64, rrSum, g_comm, &r), rrSuccess);
  // Issued after: runs after, on every rank, whatever this thread does next.
  ASSERT_EQ(rrAllReduce(second.data(), second.data(), second.size(), rrFloat64, rrMax, g_comm, nullptr), rrSuccess)
      << rrGetLastError(g_comm);
  int done = 0;
  while (!done) ASSERT_EQ(rrTest(r, &done), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(first[200002], static_cast<double>(g_size));
  EXPECT_EQ(second[6], 2.0);
  rrRequest_t barrier = nullptr;
  ASSERT_EQ(rrBarrierAsync(g_comm, &barrier), rrSuccess);
  ASSERT_EQ(rrWait(barrier), rrSuccess);
  EXPECT_EQ(rrWait(barrier), rrInvalidUsage) << "a finished request must be refused";
  EXPECT_EQ(rrAllReduceAsync(second.data(), second.data(), 1, rrFloat64, rrSum, g_comm, nullptr), rrInvalidArgument);
  EXPECT_EQ(rrBroadcastAsync(&done, &done, 1, rrInt32, g_size, g_comm, &barrier), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(g_comm)).find("root="), std::string::npos);
}

TEST(CommSplit, TwoSubCommunicatorsReduceAtOnce) {
  rrComm_t a = nullptr, b = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &a, nullptr), rrSuccess) << rrGetLastError(g_comm);
  ASSERT_EQ(rrCommSplit(g_comm, 1, -g_rank, &b, nullptr), rrSuccess) << rrGetLastError(g_comm);
  const size_t count = (size_t{1} << 17) + 3;
  bool a_ok = true, b_ok = true;
  auto drive = [&](rrComm_t comm, float value, bool* ok) {
    std::vector<float> v(count);
    for (int i = 0; i < 20 && *ok; ++i) {
      std::fill(v.begin(), v.end(), value);
      *ok = rrAllReduce(v.data(), v.data(), count, rrFloat32, rrSum, comm, nullptr) == rrSuccess &&
            v[count - 1] == value * g_size && v[0] == value * g_size;
    }
  };
  std::thread ta(drive, a, 1.0f, &a_ok), tb(drive, b, 3.0f, &b_ok);
  ta.join();
  tb.join();
  EXPECT_TRUE(a_ok) << rrGetLastError(a);
  EXPECT_TRUE(b_ok) << rrGetLastError(b);
  EXPECT_EQ(rrCommDestroy(a), rrSuccess);
  EXPECT_EQ(rrCommDestroy(b), rrSuccess);
}

TEST(SendRecv, StormEveryPairTalks) {
  // Every rank sends a distinct message to every rank (itself included) and
  // receives one from each, all in one group, five rounds in a row.
  const size_t count = 3001;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(g_size)), in(static_cast<size_t>(g_size));
    ASSERT_EQ(rrGroupStart(), rrSuccess);
    for (int p = 0; p < g_size; ++p) {
      out[static_cast<size_t>(p)].assign(count, round * 10000 + g_rank * 100 + p);
      in[static_cast<size_t>(p)].assign(count, -1);
      ASSERT_EQ(rrRecv(in[static_cast<size_t>(p)].data(), count, rrInt32, p, g_comm, nullptr), rrSuccess);
      ASSERT_EQ(rrSend(out[static_cast<size_t>(p)].data(), count, rrInt32, p, g_comm, nullptr), rrSuccess);
    }
    ASSERT_EQ(rrGroupEnd(), rrSuccess) << rrGetLastError(g_comm);
    for (int p = 0; p < g_size; ++p) {
      for (int32_t x : in[static_cast<size_t>(p)]) ASSERT_EQ(x, round * 10000 + p * 100 + g_rank) << "from " << p;
    }
  }
}

TEST(Reduce, EveryRankTakesTheSamePathAtPipelineDepthOne) {
  // Depth 1 leaves two staging slots: too few for the root's tree children on
  // 3+ ranks, so every rank must take the chain, leaves included.
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.pipeline_depth = 1;
  rrComm_t shallow = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &shallow, &config), rrSuccess) << rrGetLastError(g_comm);
  for (int root : roots()) {
    int64_t mine = g_rank + 1, total = -1;
    ASSERT_EQ(rrReduce(&mine, &total, 1, rrInt64, rrSum, root, shallow, nullptr), rrSuccess) << rrGetLastError(shallow);
    if (g_rank == root) {
      EXPECT_EQ(total, static_cast<int64_t>(g_size) * (g_size + 1) / 2);
    }
  }
  EXPECT_EQ(rrCommDestroy(shallow), rrSuccess);
}

TEST(PipelineDepth, AllReduceWhereRanksAskForDifferentDepthsTakesTheLargest) {
  // A depth set differently on each rank (by the config here; RR_PIPELINE_DEPTH
  // alike): the ring cuts its chunks by the depth (every wave of columns
  // full), so the ranks must agree on one or their chunks would not match.
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.chunk_bytes = 4096;  // 512 elements: a segment of a few chunks, whose cut the depth changes
  config.pipeline_depth = 1 + g_rank;
  rrComm_t mixed = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &mixed, &config), rrSuccess) << rrGetLastError(g_comm);
  const int64_t n = g_size;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{12345}, size_t{100003}}) {
    std::vector<int64_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = g_rank * 1000 + static_cast<int64_t>(i);
    ASSERT_EQ(rrAllReduce(v.data(), v.data(), count, rrInt64, rrSum, mixed, nullptr), rrSuccess)
        << rrGetLastError(mixed);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(v[i], 1000 * n * (n - 1) / 2 + n * static_cast<int64_t>(i)) << "count " << count << ", element " << i;
    }
  }
  EXPECT_EQ(rrCommDestroy(mixed), rrSuccess);
}

TEST(AsyncCollectives, BlockingReceiveDoesNotStarveAQueuedCollective) {
  // Rank 0 waits for rank 1's message while its queued allreduce has not
  // run yet; rank 1 sends only after that allreduce finished everywhere.
  std::vector<int32_t> v(100000, 1);
  rrRequest_t r = nullptr;
  ASSERT_EQ(rrAllReduceAsync(v.data(), v.data(), v.size(), rrInt32, rrSum, g_comm, &r), rrSuccess);
  int32_t message = -1;
  if (g_size >= 2 && g_rank == 0) {
    ASSERT_EQ(rrRecv(&message, 1, rrInt32, 1, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    EXPECT_EQ(message, 7);
  }
  ASSERT_EQ(rrWait(r), rrSuccess) << rrGetLastError(g_comm);
  if (g_size >= 2 && g_rank == 1) {
    message = 7;
    ASSERT_EQ(rrSend(&message, 1, rrInt32, 0, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  }
  EXPECT_EQ(v[99999], g_size);
}

TEST(NonBlocking, DestroyWithARequestInFlightIsRefused) {
  rrComm_t sub = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &sub, nullptr), rrSuccess);
  int32_t x = 0;
  rrRequest_t r = nullptr;
  ASSERT_EQ(rrIrecv(&x, 1, rrInt32, g_rank, sub, &r), rrSuccess);  // from itself: never matched yet
  EXPECT_EQ(rrCommDestroy(sub), rrInvalidUsage);
  EXPECT_NE(std::string(rrGetLastError(sub)).find("still in flight"), std::string::npos) << rrGetLastError(sub);
  const int32_t y = 5;
  rrRequest_t s = nullptr;
  ASSERT_EQ(rrIsend(&y, 1, rrInt32, g_rank, sub, &s), rrSuccess);
  ASSERT_EQ(rrWait(r), rrSuccess) << rrGetLastError(sub);
  ASSERT_EQ(rrWait(s), rrSuccess) << rrGetLastError(sub);
  EXPECT_EQ(x, 5);
  EXPECT_EQ(rrCommDestroy(sub), rrSuccess);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CommEnvironment);
  return RUN_ALL_TESTS();
}
