// Ranks that disagree on a call: every rank fails with rrInvalidUsage,
// quoting both calls, whichever schedule the call took (the one-shot board
// and recursive doubling carry the check in their data, the ring and the
// trees exchange it with their neighbours first), and matching calls still
// pass. On one host, where these ranks run, small calls take the board
// unless RR_ALGO says otherwise (more of it: one_shot_test.cpp).

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "world.hpp"

namespace {

using namespace fault_world;
using Faults = NoShmLeft;

// Every rank calls an allreduce of 1000 floats (sum) except `odd`, which
// calls `bad`. Every rank must fail with rrInvalidUsage quoting both calls.
void expect_mismatch(int n, int odd, const std::function<rrResult_t(rrComm_t, float*)>& bad,
                     const std::string& good_text, const std::string& bad_text) {
  fault_world::expect_mismatch(
      n, odd, on_floats([](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrSum, c, nullptr); }),
      on_floats(bad), good_text, bad_text);
}

const char* kGood = "allreduce #0 (count=1000, dtype=float32, op=sum)";

TEST_F(Faults, MismatchedCountIsReportedOnEveryRank) {
  expect_mismatch(4, 3, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 999, rrFloat32, rrSum, c, nullptr); },
                  kGood, "allreduce #0 (count=999, dtype=float32, op=sum)");
}

TEST_F(Faults, MismatchedDatatypeIsReportedOnEveryRank) {
  expect_mismatch(3, 0, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrInt32, rrSum, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=int32, op=sum)");
}

TEST_F(Faults, MismatchedOpIsReportedOnEveryRank) {
  expect_mismatch(5, 2, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrMax, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=float32, op=max)");
}

TEST_F(Faults, DifferentCollectiveIsReportedOnEveryRank) {
  expect_mismatch(4, 1, [](rrComm_t c, float* d) { return rrBroadcast(d, d, 1000, rrFloat32, 0, c, nullptr); },
                  kGood, "broadcast #0 (count=1000, dtype=float32, root=0)");
}

TEST_F(Faults, MismatchedRootIsReportedOnEveryRank) {
  auto outcomes = run_world(3, 20000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> data(64, 1.0f);
    out->result = rrBroadcast(data.data(), data.data(), 64, rrFloat32, rank == 1 ? 1 : 0, comm, nullptr);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  print(outcomes);
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.result, rrInvalidUsage) << o.error;
    EXPECT_TRUE(has(o, "root=0") && has(o, "root=1")) << o.error;
  }
}

TEST_F(Faults, MatchingCallsStillPassWithTheCheck) {
  // The check must not refuse what is legal: every collective, in turn.
  auto outcomes = run_world(3, 20000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    std::vector<float> a(3 * 50, 1.0f), b(3 * 50, 0.0f);
    rrResult_t r = rrAllReduce(a.data(), b.data(), 50, rrFloat32, rrSum, comm, nullptr);
    if (r == rrSuccess) r = rrBroadcast(a.data(), b.data(), 50, rrFloat32, 2, comm, nullptr);
    if (r == rrSuccess) r = rrReduce(a.data(), b.data(), 50, rrFloat32, rrMin, 1, comm, nullptr);
    if (r == rrSuccess) r = rrAllGather(a.data(), b.data(), 50, rrFloat32, comm, nullptr);
    if (r == rrSuccess) r = rrReduceScatter(a.data(), b.data(), 50, rrFloat32, rrSum, comm, nullptr);
    if (r == rrSuccess) r = rrGather(a.data(), b.data(), 50, rrFloat32, 0, comm, nullptr);
    if (r == rrSuccess) r = rrScatter(a.data(), b.data(), 50, rrFloat32, 0, comm, nullptr);
    if (r == rrSuccess) r = rrAllToAll(a.data(), b.data(), 50, rrFloat32, comm, nullptr);
    if (r == rrSuccess) r = rrBarrier(comm, nullptr);
    (void)rank;
    out->result = r;
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(comm));
  });
  for (const Outcome& o : outcomes) EXPECT_EQ(o.result, rrSuccess) << o.error;
}

// The ring exchanges the header with its neighbours before any data: forced
// here (1000 floats would take recursive doubling by default). Its header
// says how it cuts the call: on one host a same-host slot a chunk, here a
// segment of 250 (251 for 1001 floats) in one.
TEST_F(Faults, MismatchedCountOnTheRingIsReportedOnEveryRank) {
  setenv("RR_ALGO", "ring", 1);  // the forked ranks inherit it
  expect_mismatch(4, 1, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1001, rrFloat32, rrSum, c, nullptr); },
                  "allreduce #0 (count=1000, dtype=float32, op=sum, chunks of 250 elements)",
                  "allreduce #0 (count=1001, dtype=float32, op=sum, chunks of 251 elements)");
  unsetenv("RR_ALGO");
}

// Ranks that would cut the ring into different chunks (RR_CHUNK_BYTES set
// differently on one) fail at once, every one, naming both cuts, instead of
// exchanging chunks that do not match. On the transport's ring (RR_SAME_HOST=ucx:
// the slot rings cut by RR_SHM_SLOT_BYTES). 30000 floats on 3 ranks are
// segments of 10000; 8 KiB chunks are 2048 floats, 5 columns, which the
// depth of 4 balances to 8 of 1250; 4 KiB chunks, 10 columns, to 12 of 834.
TEST_F(Faults, MismatchedChunkBytesOnTheRingIsReportedOnEveryRank) {
  setenv("RR_ALGO", "ring", 1);
  setenv("RR_SAME_HOST", "ucx", 1);
  setenv("RR_PIPELINE_DEPTH", "4", 1);
  auto outcomes = run_world(3, 20000, {}, [](int rank, rrComm_t comm, Outcome* out) {
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    config.chunk_bytes = rank == 1 ? 4096 : 8192;
    rrComm_t sub = nullptr;
    out->result = rrCommSplit(comm, 0, rank, &sub, &config);
    if (out->result != rrSuccess) {
      std::snprintf(out->error, sizeof(out->error), "rrCommSplit: %s", rrGetLastError(comm));
      return;
    }
    std::vector<float> data(30000, 1.0f);
    out->result = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, sub, nullptr);
    std::snprintf(out->error, sizeof(out->error), "%s", rrGetLastError(sub));
    rrCommDestroy(sub);
  });
  unsetenv("RR_ALGO");
  unsetenv("RR_SAME_HOST");
  unsetenv("RR_PIPELINE_DEPTH");
  print(outcomes);
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.result, rrInvalidUsage) << o.error;
    EXPECT_TRUE(has(o, "chunks of 1250 elements, depth 4") && has(o, "chunks of 834 elements, depth 4")) << o.error;
  }
}

// Recursive doubling's fold (forced: on one host small calls take the
// one-shot board, tests/fault/one_shot_test.cpp): a rank that sits out
// hands its input to its odd neighbour, which finds the mismatch in that
// first message; the ranks that take part in the exchanges (6 = 4 + 2:
// ranks 0 and 2 sit out) then wait for a rank that stopped, and hear why.
TEST_F(Faults, MismatchOnARankThatSitsOutIsReportedOnEveryRank) {
  setenv("RR_ALGO", "rd", 1);
  expect_mismatch(6, 2, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrInt32, rrSum, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=int32, op=sum)");
  unsetenv("RR_ALGO");
}

TEST_F(Faults, MismatchOnARankThatFoldsInIsReportedOnEveryRank) {
  setenv("RR_ALGO", "rd", 1);
  expect_mismatch(5, 1, [](rrComm_t c, float* d) { return rrAllReduce(d, d, 1000, rrFloat32, rrMin, c, nullptr); },
                  kGood, "allreduce #0 (count=1000, dtype=float32, op=min)");
  unsetenv("RR_ALGO");
}

// A barrier carries the barrier's header, in recursive doubling's messages
// or on the one-shot board: an allreduce on the other ranks is told apart.
TEST_F(Faults, BarrierAgainstAllreduceIsReportedOnEveryRank) {
  expect_mismatch(4, 2, [](rrComm_t c, float*) { return rrBarrier(c, nullptr); }, kGood, "barrier #0");
}

TEST_F(Faults, BarrierAgainstAllreduceByRecursiveDoublingIsReportedOnEveryRank) {
  setenv("RR_ALGO", "rd", 1);
  expect_mismatch(4, 2, [](rrComm_t c, float*) { return rrBarrier(c, nullptr); }, kGood, "barrier #0");
  unsetenv("RR_ALGO");
}

}  // namespace
