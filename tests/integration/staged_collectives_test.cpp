// The staging pipeline (lib/comm/staged_collectives.hpp) over real ranks,
// without a GPU: the copies go through memory::HostCopyEngine, whose lanes
// are threads copying plain memory asynchronously, so a segment read before
// its copy landed, a slot reused before its copy back finished, or a copy
// back that never happened leaves wrong data or the poison behind. Every
// rank runs this binary under rr-run and the same tests in the same order.
//
// Segments are made tiny (down to 64 bytes) so that even small counts take
// many of them, with counts that do not divide them, 0 and 1 element.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/setup.hpp"
#include "comm/communicator.hpp"
#include "comm/operation_queue.hpp"
#include "comm/staged_collectives.hpp"
#include "memory/host_copy_engine.hpp"
#include "reduce/reduce.hpp"
#include "../common/typed_reference.hpp"

namespace rr {
namespace {

std::unique_ptr<Communicator> g_comm;
int g_rank = 0;
int g_size = 1;

constexpr uint8_t kPoison = 0xCD;
constexpr size_t kGuardBytes = 16;

class CommEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    config.chunk_bytes = 96;  // several chunks inside one segment, too
    Status made = setup::from_url("env://", -1, -1, &config, &g_comm);
    ASSERT_TRUE(made.ok()) << made.message();
    g_rank = g_comm->rank();
    g_size = g_comm->size();
  }
  void TearDown() override { g_comm.reset(); }
};

const rrDataType_t kTypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64,
                               rrFloat16, rrBfloat16, rrFloat32, rrFloat64};
const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg};
const rrRedOp_t kBitwiseOps[] = {rrBand, rrBor, rrBxor};  // integer types only
const size_t kSegmentBytes[] = {64, 1000};

// "Device" memory of the host engine: plain bytes, poisoned, with a guard
// after `bytes` that nothing may write.
struct Buffer {
  explicit Buffer(size_t bytes) : bytes(bytes), data(bytes + kGuardBytes, kPoison) {}
  void* get() { return data.data(); }
  bool guard_intact() const {
    for (size_t k = 0; k < kGuardBytes; ++k) {
      if (data[bytes + k] != kPoison) return false;
    }
    return true;
  }
  size_t bytes;
  std::vector<uint8_t> data;
};

std::string describe(const char* what, rrDataType_t dtype, rrRedOp_t op, size_t count, size_t segment_bytes,
                     bool in_place) {
  return std::string(what) + " " + reduce::dtype_name(dtype) + " " + reduce::op_name(op) + " count=" +
         std::to_string(count) + " segment_bytes=" + std::to_string(segment_bytes) +
         (in_place ? " in place" : " out of place") + " ranks=" + std::to_string(g_size);
}

// With `served`, the ring's reductions run on the engine's reduction
// servers (RR_GPU_REDUCE=device on a GPU), reading this rank's values from
// the "device" buffer, and only this rank's own ring segment of each segment
// is copied in.
void check_allreduce(memory::HostCopyEngine& engine, size_t segment_bytes, rrDataType_t dtype, rrRedOp_t op,
                     size_t count, bool in_place, uint64_t seed, bool served = false) {
  SCOPED_TRACE(describe("allreduce", dtype, op, count, segment_bytes, in_place) +
               (served ? " served reductions" : " host reductions"));
  StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
  ASSERT_TRUE(staged.init().ok());
  staged.set_device_reductions(served, 10000);
  const uint64_t reductions_before = engine.reductions();
  const size_t bytes = count * reduce::dtype_size(dtype);
  Buffer send(bytes), recv(bytes);
  test::fill(dtype, op, g_rank, seed, send.get(), 0, count);
  const std::vector<uint8_t> original = send.data;
  void* out = in_place ? send.get() : recv.get();
  const uint64_t copies_before = engine.copies();
  Status done = staged.run_now(staged.allreduce(send.get(), out, count, dtype, op));
  ASSERT_TRUE(done.ok()) << done.message();
  // Every segment came in and went back: two copies each.
  const size_t per_segment = std::max<size_t>(1, segment_bytes / reduce::dtype_size(dtype));
  EXPECT_EQ(engine.copies() - copies_before, 2 * ((count + per_segment - 1) / per_segment));
  if (!in_place) {
    EXPECT_EQ(send.data, original) << "the send buffer was modified";
  }
  EXPECT_TRUE((in_place ? send : recv).guard_intact()) << "wrote past count";
  std::string report;
  EXPECT_EQ(test::count_wrong(dtype, op, g_size, seed, out, 0, count, &report), 0u) << report;
  if (served && g_size > 1 && count >= static_cast<size_t>(g_size)) {
    EXPECT_GT(engine.reductions(), reductions_before) << "the host reduced, not the servers";
  } else if (!served) {
    EXPECT_EQ(engine.reductions(), reductions_before);
  }
}

struct Case {
  rrDataType_t dtype;
  rrRedOp_t op;
};

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (rrDataType_t t : kTypes) {
    for (rrRedOp_t o : kOps) cases.push_back({t, o});
    if (!reduce::is_floating(t)) {
      for (rrRedOp_t o : kBitwiseOps) cases.push_back({t, o});
    }
  }
  return cases;
}

class StagedAllReduceEveryTypeAndOp : public ::testing::TestWithParam<Case> {};

TEST_P(StagedAllReduceEveryTypeAndOp, MatchesDoubleReference) {
  const Case c = GetParam();
  memory::HostCopyEngine engine;
  uint64_t seed = static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  for (size_t segment_bytes : kSegmentBytes) {
    // Zero, one, fewer than a segment, many segments with a short last one.
    for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}}) {
      for (bool in_place : {false, true}) check_allreduce(engine, segment_bytes, c.dtype, c.op, count, in_place, ++seed);
    }
  }
  // The ring's reductions on the reduction servers, as RR_GPU_REDUCE=device.
  for (size_t segment_bytes : kSegmentBytes) {
    for (size_t count : {size_t{1}, size_t{13}, size_t{1031}}) {
      for (bool in_place : {false, true}) {
        check_allreduce(engine, segment_bytes, c.dtype, c.op, count, in_place, ++seed, /*served=*/true);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HostEngine, StagedAllReduceEveryTypeAndOp, ::testing::ValuesIn(every_case()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(reduce::dtype_name(info.param.dtype)) + "_" +
                                  reduce::op_name(info.param.op);
                         });

// Copies that take long: a segment used before its copy landed, or a slot
// refilled while its copy back still runs, would show.
TEST(StagedAllReduce, SlowCopiesStillLandInOrder) {
  memory::HostCopyEngine engine(std::chrono::microseconds(300));
  check_allreduce(engine, 256, rrFloat32, rrSum, 4099, false, 7);
  check_allreduce(engine, 256, rrInt64, rrMax, 1001, true, 8);
  check_allreduce(engine, 256, rrFloat64, rrAvg, 3001, true, 13, /*served=*/true);
}

// The pool is three slots of one segment, whatever the count.
TEST(StagedAllReduce, StagingMemoryIsThreeSegmentsForAnyCount) {
  memory::HostCopyEngine engine;
  check_allreduce(engine, 4096, rrFloat32, rrSum, 100000, false, 9);
  EXPECT_EQ(engine.slots(), StagedCollectives::kSlots);
  const size_t slot_bytes = static_cast<uint8_t*>(engine.slot(1)) - static_cast<uint8_t*>(engine.slot(0));
  EXPECT_EQ(slot_bytes, size_t{4096});
}

// Both lanes in one queue, as two CUDA streams in one hardware queue: what
// was issued later waits behind every earlier wait. The pipeline issues no
// wait before what releases it, so this only serializes (copy_engine.hpp);
// issued in another order, it hangs here.
TEST(StagedAllReduce, LanesSharingOneQueueOnlySerialize) {
  memory::HostCopyEngine engine(std::chrono::microseconds(100), /*one_queue=*/true);
  check_allreduce(engine, 256, rrFloat32, rrSum, 4099, false, 10);
  check_allreduce(engine, 64, rrBfloat16, rrAvg, 777, true, 11);
  // The reduction servers in the same queue: each runs before its segment's
  // copy back, which waits for the segment to end.
  check_allreduce(engine, 256, rrFloat32, rrSum, 4099, false, 14, /*served=*/true);
  check_allreduce(engine, 64, rrInt32, rrAvg, 777, true, 15, /*served=*/true);
}

// A lane that holds only a few operations, as a full CUDA launch queue:
// issuing blocks until the lane drained, which takes the host half's
// releases. The host half runs meanwhile (it is started before the issue),
// so a call of many segments still completes; run in the other order, it
// hangs here.
TEST(StagedAllReduce, FullLanesBlockTheIssueNotTheCall) {
  for (bool one_queue : {false, true}) {
    SCOPED_TRACE(one_queue ? "one queue" : "three lanes");
    memory::HostCopyEngine engine(std::chrono::microseconds(20), one_queue, /*capacity=*/4);
    check_allreduce(engine, 64, rrFloat32, rrSum, 4099, false, 16);  // 257 segments
    check_allreduce(engine, 64, rrInt32, rrMax, 1031, true, 17, /*served=*/true);
  }
}

// What a stream does: the device halves of two calls are issued before the
// host half of the first runs. The second call's copies wait for nothing the
// first call's host half needs, with one queue or two.
TEST(StagedAllReduce, SecondCallIssuedBeforeTheFirstRuns) {
  for (bool one_queue : {false, true}) {
    SCOPED_TRACE(one_queue ? "one queue" : "two lanes");
    memory::HostCopyEngine engine(std::chrono::microseconds(50), one_queue);
    StagedCollectives staged(g_comm.get(), &engine, 128);
    ASSERT_TRUE(staged.init().ok());
    const size_t count = 1000;  // 8 segments of 32 floats: more than the slots
    Buffer a(count * 4), b(count * 4), out_a(count * 4), out_b(count * 4);
    test::fill(rrFloat32, rrSum, g_rank, 500, a.get(), 0, count);
    test::fill(rrFloat32, rrMax, g_rank, 501, b.get(), 0, count);
    const StagedCollectives::Plan first = staged.allreduce(a.get(), out_a.get(), count, rrFloat32, rrSum);
    const StagedCollectives::Plan second = staged.allreduce(b.get(), out_b.get(), count, rrFloat32, rrMax);
    const uint64_t first_count = staged.take_counts(first);
    const uint64_t second_count = staged.take_counts(second);
    ASSERT_TRUE(staged.issue(first, first_count).ok());
    ASSERT_TRUE(staged.issue(second, second_count).ok());
    EXPECT_EQ(second_count, first_count + first.segments);
    // On the communicator's queue, as every call that drives its transport.
    Status ran = g_comm->queue().run([&] { return staged.run(first, first_count); });
    ASSERT_TRUE(ran.ok()) << ran.message();
    ran = g_comm->queue().run([&] { return staged.run(second, second_count); });
    ASSERT_TRUE(ran.ok()) << ran.message();
    // A call without copies, issued after both: once it is done, so are theirs.
    ASSERT_TRUE(staged.run_now(StagedCollectives::host_call([] { return Status::Ok(); })).ok());
    std::string report;
    EXPECT_EQ(test::count_wrong(rrFloat32, rrSum, g_size, 500, out_a.get(), 0, count, &report), 0u) << report;
    EXPECT_EQ(test::count_wrong(rrFloat32, rrMax, g_size, 501, out_b.get(), 0, count, &report), 0u) << report;
  }
}

// A segment whose host collective fails ends the call with its error; the
// copies of the segments after it are released, not left waiting, and the
// next call runs normally.
// With three lanes, a copy back released before its copy in landed would
// race it (ThreadSanitizer's runs see that).
TEST(StagedAllReduce, FailedSegmentReleasesTheRestAndTheNextCallRuns) {
  for (bool one_queue : {true, false}) {
    SCOPED_TRACE(one_queue ? "one queue" : "three lanes");
    memory::HostCopyEngine engine(std::chrono::microseconds(20), one_queue);
    StagedCollectives staged(g_comm.get(), &engine, 64);
    ASSERT_TRUE(staged.init().ok());
    std::vector<uint8_t> device(6 * 64, 1), back(6 * 64, 0);
    StagedCollectives::Plan plan;
    plan.segments = 6;
    plan.copies = [&](size_t k, void* slot) {
      return StagedCollectives::SegmentCopies{memory::contiguous(slot, device.data() + k * 64, 64),
                                              memory::contiguous(back.data() + k * 64, slot, 64)};
    };
    size_t ran = 0;
    plan.collective = [&](size_t k, void*) {
      ++ran;
      return k == 2 ? InternalError("segment 2 failed") : Status::Ok();
    };
    const uint64_t copies_before = engine.copies();
    Status failed = staged.run_now(plan);
    EXPECT_EQ(failed.code(), Code::kInternalError);
    EXPECT_EQ(failed.message(), "segment 2 failed");
    EXPECT_EQ(ran, 3u) << "no segment runs after the failed one";
    EXPECT_EQ(engine.copies() - copies_before, 12u) << "every issued copy still ran";
    check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 12);
  }
}

// An engine whose copy number `fail_at` cannot be issued (as a CUDA error
// at enqueue): what was issued before it still runs.
class FailingIssueEngine : public memory::HostCopyEngine {
 public:
  explicit FailingIssueEngine(uint64_t fail_at) : HostCopyEngine(std::chrono::microseconds(20)), fail_at_(fail_at) {}
  Status copy(memory::Lane lane, const memory::Copy& copy) override {
    if (++issued_ != fail_at_) return HostCopyEngine::copy(lane, copy);
    if (before_failing) before_failing();
    return InternalError("copy " + std::to_string(fail_at_) + " could not be issued");
  }
  std::function<void()> before_failing;  // runs on the issuing thread

 private:
  uint64_t fail_at_;
  uint64_t issued_ = 0;
};

// A device half that fails part way: the call returns that error; its host
// half, already running, stops at the first segment not issued and releases
// the rest, so nothing waits for ever; a later call on the engine runs. Every
// rank fails at the same copy, so the ranks' collectives still match.
TEST(StagedAllReduce, AFailedIssueEndsTheCallAndTheNextCallRuns) {
  for (uint64_t fail_at : {2, 7}) {
    SCOPED_TRACE("copy " + std::to_string(fail_at) + " fails");
    FailingIssueEngine engine(fail_at);
    StagedCollectives staged(g_comm.get(), &engine, 64);
    ASSERT_TRUE(staged.init().ok());
    const size_t count = 1000;  // 63 segments of 16 floats
    Buffer send(count * 4), recv(count * 4);
    test::fill(rrFloat32, rrSum, g_rank, 18, send.get(), 0, count);
    Status failed = staged.run_now(staged.allreduce(send.get(), recv.get(), count, rrFloat32, rrSum));
    EXPECT_EQ(failed.code(), Code::kInternalError);
    EXPECT_EQ(failed.message(), "copy " + std::to_string(fail_at) + " could not be issued");
    check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 19);
  }
}

// The same with the reductions on the servers, where a segment's server is
// issued after the next segments' copies in: the host half must not post a
// reduction for a segment whose server the failed issue never reached (it
// would wait out the reduction timeout, set past the test's time limit, so
// such a regression fails as a timeout), and the engine stays usable.
TEST(StagedAllReduce, AFailedIssueWithServersEndsTheCallAtOnce) {
  for (uint64_t fail_at : {2, 3, 6}) {
    SCOPED_TRACE("copy " + std::to_string(fail_at) + " fails");
    FailingIssueEngine engine(fail_at);
    StagedCollectives staged(g_comm.get(), &engine, 64);
    ASSERT_TRUE(staged.init().ok());
    staged.set_device_reductions(true, 3600 * 1000);
    const size_t count = 1000;
    Buffer send(count * 4), recv(count * 4);
    test::fill(rrFloat32, rrSum, g_rank, 20, send.get(), 0, count);
    Status failed = staged.run_now(staged.allreduce(send.get(), recv.get(), count, rrFloat32, rrSum));
    EXPECT_EQ(failed.message(), "copy " + std::to_string(fail_at) + " could not be issued");
    check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 21, /*served=*/true);
  }
}

// Stream-ordered calls as comm/stream_order.cpp makes them, on the
// communicator's queue (StagedCollectives::submit), with hooks that record
// what they were told.
struct Recorded {
  int after_issue = 0;
  std::vector<Status> failures;
};

StagedCollectives::Submission recording(Recorded* recorded, std::function<Status()> enter = {}) {
  StagedCollectives::Submission submission;
  submission.enter = std::move(enter);
  submission.after_issue = [recorded] {
    ++recorded->after_issue;
    return Status::Ok();
  };
  submission.failed = [recorded](const Status& cause, uint64_t) { recorded->failures.push_back(cause); };
  return submission;
}

// Waits until the queue ran everything submitted and the lanes are idle.
void drain(StagedCollectives& staged) {
  ASSERT_TRUE(g_comm->queue().run([] { return Status::Ok(); }).ok());
  ASSERT_TRUE(staged.run_now(StagedCollectives::host_call([] { return Status::Ok(); })).ok());
}

// Calls submitted back to back, each host half queued before its device
// half is issued, on a queue that holds a few operations: all complete.
TEST(StagedSubmit, CallsQueuedBeforeTheirIssueComplete) {
  memory::HostCopyEngine engine(std::chrono::microseconds(20), /*one_queue=*/true, /*capacity=*/4);
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  const size_t count = 1001;  // 63 segments of 16 floats
  Buffer a(count * 4), b(count * 4), out_a(count * 4), out_b(count * 4);
  test::fill(rrFloat32, rrSum, g_rank, 30, a.get(), 0, count);
  test::fill(rrInt32, rrMax, g_rank, 31, b.get(), 0, count);
  Recorded recorded;
  bool refused = false;
  auto first = std::make_shared<const StagedCollectives::Plan>(
      staged.allreduce(a.get(), out_a.get(), count, rrFloat32, rrSum));
  auto second = std::make_shared<const StagedCollectives::Plan>(
      staged.allreduce(b.get(), out_b.get(), count, rrInt32, rrMax));
  EXPECT_TRUE(staged.submit(g_comm->queue(), first, recording(&recorded), &refused).ok());
  EXPECT_TRUE(staged.submit(g_comm->queue(), second, recording(&recorded), &refused).ok());
  drain(staged);  // whatever was queued, before the buffers go
  EXPECT_EQ(recorded.after_issue, 2);
  EXPECT_TRUE(recorded.failures.empty());
  std::string report;
  EXPECT_EQ(test::count_wrong(rrFloat32, rrSum, g_size, 30, out_a.get(), 0, count, &report), 0u) << report;
  EXPECT_EQ(test::count_wrong(rrInt32, rrMax, g_size, 31, out_b.get(), 0, count, &report), 0u) << report;
}

// A host half that fails after a complete issue is reported (the call had
// returned already), once; the next call runs.
TEST(StagedSubmit, AFailedHostHalfIsReported) {
  memory::HostCopyEngine engine(std::chrono::microseconds(20));
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  std::vector<uint8_t> device(6 * 64, 1), back(6 * 64, 0);
  auto plan = std::make_shared<StagedCollectives::Plan>();
  plan->segments = 6;
  plan->copies = [&](size_t k, void* slot) {
    return StagedCollectives::SegmentCopies{memory::contiguous(slot, device.data() + k * 64, 64),
                                            memory::contiguous(back.data() + k * 64, slot, 64)};
  };
  plan->collective = [](size_t k, void*) { return k == 2 ? InternalError("segment 2 failed") : Status::Ok(); };
  Recorded recorded;
  bool refused = false;
  EXPECT_TRUE(staged.submit(g_comm->queue(), plan, recording(&recorded), &refused).ok());
  drain(staged);
  ASSERT_EQ(recorded.failures.size(), 1u);
  EXPECT_EQ(recorded.failures[0].message(), "segment 2 failed");
  check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 32);
}

// A device half that fails part way: the call returns the failure, and the
// host half reports it as the cause (not its own "not issued"); after_issue
// still runs. Every rank fails at the same copy.
TEST(StagedSubmit, AFailedIssueIsReturnedAndReportedAsTheCause) {
  FailingIssueEngine engine(/*fail_at=*/5);
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  const size_t count = 1000;
  Buffer send(count * 4), recv(count * 4);
  auto plan = std::make_shared<const StagedCollectives::Plan>(
      staged.allreduce(send.get(), recv.get(), count, rrFloat32, rrSum));
  Recorded recorded;
  bool refused = false;
  const Status submitted = staged.submit(g_comm->queue(), plan, recording(&recorded), &refused);
  EXPECT_EQ(submitted.message(), "copy 5 could not be issued");
  EXPECT_FALSE(refused);
  drain(staged);
  EXPECT_EQ(recorded.after_issue, 1);
  ASSERT_EQ(recorded.failures.size(), 1u);
  EXPECT_EQ(recorded.failures[0].message(), "copy 5 could not be issued");
  check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 33);
}

// The issue failing at the last copy back, which the host half does not
// wait for, after the host half ran every segment: the failure is still
// reported, once.
TEST(StagedSubmit, AnIssueFailingAfterTheHostHalfIsReported) {
  const size_t count = 1000;  // 63 segments, 126 copies
  FailingIssueEngine engine(/*fail_at=*/126);
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  Buffer send(count * 4), recv(count * 4);
  auto plan = std::make_shared<StagedCollectives::Plan>(
      staged.allreduce(send.get(), recv.get(), count, rrFloat32, rrSum));
  std::atomic<size_t> collectives{0};
  plan->collective = [&collectives, run = plan->collective](size_t k, void* slot) {
    Status done = run(k, slot);
    ++collectives;
    return done;
  };
  // Fail only once the host half is through its last segment (and, almost
  // surely, past its own check for a failed issue).
  engine.before_failing = [&] {
    while (collectives.load() < plan->segments) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  Recorded recorded;
  bool refused = false;
  EXPECT_EQ(staged.submit(g_comm->queue(), plan, recording(&recorded), &refused).message(),
            "copy 126 could not be issued");
  drain(staged);
  ASSERT_EQ(recorded.failures.size(), 1u);
  EXPECT_EQ(recorded.failures[0].message(), "copy 126 could not be issued");
}

// The host half's setup failing (cudaSetDevice on a GPU) ends the call
// there, reported; its segments are released, so the lanes go on.
TEST(StagedSubmit, AFailedEnterEndsTheCallAndReleasesItsSegments) {
  memory::HostCopyEngine engine(std::chrono::microseconds(20), /*one_queue=*/true);
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  const size_t count = 1000;
  Buffer send(count * 4), recv(count * 4);
  auto counted = std::make_shared<StagedCollectives::Plan>(
      staged.allreduce(send.get(), recv.get(), count, rrFloat32, rrSum));
  int collectives = 0;  // read after drain(): the queue's thread is done
  counted->collective = [&collectives, run = counted->collective](size_t k, void* slot) {
    ++collectives;
    return run(k, slot);
  };
  Recorded recorded;
  bool refused = false;
  EXPECT_TRUE(staged
                  .submit(g_comm->queue(), counted, recording(&recorded, [] { return CudaError("no device today"); }),
                          &refused)
                  .ok());
  drain(staged);
  EXPECT_EQ(collectives, 0) << "a collective ran after the host half's setup failed";
  ASSERT_EQ(recorded.failures.size(), 1u);
  EXPECT_EQ(recorded.failures[0].code(), Code::kCudaError);
  check_allreduce(engine, 256, rrInt32, rrSum, 1001, false, 34);
}

TEST(StagedReduceScatter, MatchesDoubleReference) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  uint64_t seed = 100;
  const Case cases[] = {{rrInt32, rrSum}, {rrFloat32, rrAvg}, {rrFloat16, rrMax}, {rrUint8, rrProd}, {rrInt64, rrBxor}};
  for (const Case& c : cases) {
    for (size_t segment_bytes : kSegmentBytes) {
      for (size_t recvcount : {size_t{0}, size_t{1}, size_t{7}, size_t{301}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(describe("reduce-scatter", c.dtype, c.op, recvcount, segment_bytes, in_place));
          StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
          ASSERT_TRUE(staged.init().ok());
          const size_t elem = reduce::dtype_size(c.dtype);
          const size_t total = recvcount * static_cast<size_t>(g_size);
          Buffer send(total * elem), recv(recvcount * elem);
          test::fill(c.dtype, c.op, g_rank, ++seed, send.get(), 0, total);
          void* out = in_place ? static_cast<uint8_t*>(send.get()) + static_cast<size_t>(g_rank) * recvcount * elem
                               : recv.get();
          Status done = staged.run_now(staged.reduce_scatter(send.get(), out, recvcount, c.dtype, c.op));
          ASSERT_TRUE(done.ok()) << done.message();
          EXPECT_TRUE(send.guard_intact() && recv.guard_intact()) << "wrote past the buffers";
          std::string report;
          EXPECT_EQ(test::count_wrong(c.dtype, c.op, g_size, seed, out, static_cast<size_t>(g_rank) * recvcount,
                                      recvcount, &report), 0u) << report;
        }
      }
    }
  }
}

TEST(StagedAllGather, EveryBlockArrives) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  uint64_t seed = 200;
  for (rrDataType_t dtype : {rrInt8, rrBfloat16, rrFloat64}) {
    for (size_t segment_bytes : kSegmentBytes) {
      for (size_t sendcount : {size_t{0}, size_t{1}, size_t{9}, size_t{517}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(describe("all-gather", dtype, rrSum, sendcount, segment_bytes, in_place));
          StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
          ASSERT_TRUE(staged.init().ok());
          const size_t elem = reduce::dtype_size(dtype);
          Buffer send(sendcount * elem), recv(sendcount * elem * static_cast<size_t>(g_size));
          ++seed;
          uint8_t* mine = in_place ? static_cast<uint8_t*>(recv.get()) + static_cast<size_t>(g_rank) * sendcount * elem
                                   : static_cast<uint8_t*>(send.get());
          test::fill(dtype, rrSum, g_rank, seed, mine, 0, sendcount);
          Status done = staged.run_now(staged.all_gather(mine, recv.get(), sendcount, dtype));
          ASSERT_TRUE(done.ok()) << done.message();
          EXPECT_TRUE(recv.guard_intact()) << "wrote past recvbuff";
          std::string report;
          size_t wrong = 0;
          for (int r = 0; r < g_size; ++r) {
            wrong += test::count_not_input(dtype, rrSum, r, seed,
                                           static_cast<uint8_t*>(recv.get()) + static_cast<size_t>(r) * sendcount * elem,
                                           0, sendcount, &report);
          }
          EXPECT_EQ(wrong, 0u) << report;
        }
      }
    }
  }
}

TEST(StagedBroadcast, EveryRootReachesEveryRank) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  uint64_t seed = 300;
  for (int root = 0; root < g_size; ++root) {
    for (size_t segment_bytes : kSegmentBytes) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{11}, size_t{700}}) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(describe("broadcast", rrInt32, rrSum, count, segment_bytes, in_place) + " root=" +
                       std::to_string(root));
          StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
          ASSERT_TRUE(staged.init().ok());
          Buffer send(count * 4), recv(count * 4);
          ++seed;
          void* out = in_place ? send.get() : recv.get();
          if (g_rank == root) test::fill(rrInt32, rrSum, root, seed, send.get(), 0, count);
          Status done = staged.run_now(staged.broadcast(send.get(), out, count, rrInt32, root));
          ASSERT_TRUE(done.ok()) << done.message();
          EXPECT_TRUE(recv.guard_intact() && send.guard_intact());
          std::string report;
          EXPECT_EQ(test::count_not_input(rrInt32, rrSum, root, seed, out, 0, count, &report), 0u) << report;
        }
      }
    }
  }
}

TEST(StagedReduce, RootGetsTheReductionOthersKeepTheirBuffers) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  uint64_t seed = 400;
  for (int root = 0; root < g_size; ++root) {
    for (rrRedOp_t op : {rrSum, rrMin, rrAvg}) {
      // Segments of up to 64 bytes take the tree, longer ones the chain.
      for (size_t segment_bytes : kSegmentBytes) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{333}}) {
          SCOPED_TRACE(describe("reduce", rrFloat32, op, count, segment_bytes, false) + " root=" +
                       std::to_string(root));
          StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
          ASSERT_TRUE(staged.init().ok());
          Buffer send(count * 4), recv(count * 4);
          test::fill(rrFloat32, op, g_rank, ++seed, send.get(), 0, count);
          Status done = staged.run_now(staged.reduce(send.get(), recv.get(), count, rrFloat32, op, root));
          ASSERT_TRUE(done.ok()) << done.message();
          EXPECT_TRUE(recv.guard_intact());
          if (g_rank == root) {
            std::string report;
            EXPECT_EQ(test::count_wrong(rrFloat32, op, g_size, seed, recv.get(), 0, count, &report), 0u) << report;
          } else {
            // A rank that is not the root has no result: its recvbuff stays as it was.
            EXPECT_EQ(recv.data, std::vector<uint8_t>(count * 4 + kGuardBytes, kPoison));
          }
        }
      }
    }
  }
}

uint8_t* block(void* base, size_t index, size_t count, size_t elem) {
  return static_cast<uint8_t*>(base) + index * count * elem;
}

TEST(StagedGather, RootGetsEveryBlockOthersKeepTheirBuffers) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  const size_t ranks = static_cast<size_t>(g_size);
  uint64_t seed = 600;
  for (int root = 0; root < g_size; ++root) {
    for (rrDataType_t dtype : {rrInt8, rrFloat16, rrFloat64}) {
      for (size_t segment_bytes : kSegmentBytes) {
        for (size_t sendcount : {size_t{0}, size_t{1}, size_t{9}, size_t{517}}) {
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(describe("gather", dtype, rrSum, sendcount, segment_bytes, in_place) + " root=" +
                         std::to_string(root));
            StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
            ASSERT_TRUE(staged.init().ok());
            const size_t elem = reduce::dtype_size(dtype);
            const bool is_root = g_rank == root;
            Buffer send(sendcount * elem), recv(sendcount * elem * ranks);
            // In place (on the root): its block of recvbuff is its input.
            uint8_t* mine = in_place && is_root ? block(recv.get(), static_cast<size_t>(root), sendcount, elem)
                                                : static_cast<uint8_t*>(send.get());
            test::fill(dtype, rrSum, g_rank, ++seed, mine, 0, sendcount);
            const std::vector<uint8_t> original = send.data;
            // recvbuff is not the others' to give: NULL there.
            Status done = staged.run_now(staged.gather(mine, is_root ? recv.get() : nullptr, sendcount, dtype, root));
            ASSERT_TRUE(done.ok()) << done.message();
            EXPECT_TRUE(send.guard_intact() && recv.guard_intact()) << "wrote past the buffers";
            EXPECT_EQ(send.data, original) << "the send buffer was modified";
            if (is_root) {
              std::string report;
              size_t wrong = 0;
              for (size_t r = 0; r < ranks; ++r) {
                wrong += test::count_not_input(dtype, rrSum, static_cast<int>(r), seed,
                                               block(recv.get(), r, sendcount, elem), 0, sendcount, &report);
              }
              EXPECT_EQ(wrong, 0u) << report;
            } else {
              EXPECT_EQ(recv.data, std::vector<uint8_t>(recv.data.size(), kPoison));
            }
          }
        }
      }
    }
  }
}

TEST(StagedScatter, EveryRankGetsItsBlockOfTheRoots) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  const size_t ranks = static_cast<size_t>(g_size);
  uint64_t seed = 700;
  for (int root = 0; root < g_size; ++root) {
    for (rrDataType_t dtype : {rrUint8, rrBfloat16, rrInt64}) {
      for (size_t segment_bytes : kSegmentBytes) {
        for (size_t recvcount : {size_t{0}, size_t{1}, size_t{9}, size_t{517}}) {
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(describe("scatter", dtype, rrSum, recvcount, segment_bytes, in_place) + " root=" +
                         std::to_string(root));
            StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
            ASSERT_TRUE(staged.init().ok());
            const size_t elem = reduce::dtype_size(dtype);
            const bool is_root = g_rank == root;
            Buffer send(recvcount * elem * ranks), recv(recvcount * elem);
            ++seed;
            if (is_root) test::fill(dtype, rrSum, root, seed, send.get(), 0, recvcount * ranks);
            const std::vector<uint8_t> original = send.data;
            uint8_t* out = in_place && is_root ? block(send.get(), static_cast<size_t>(root), recvcount, elem)
                                               : static_cast<uint8_t*>(recv.get());
            // sendbuff is only the root's: NULL elsewhere.
            Status done = staged.run_now(staged.scatter(is_root ? send.get() : nullptr, out, recvcount, dtype, root));
            ASSERT_TRUE(done.ok()) << done.message();
            EXPECT_TRUE(send.guard_intact() && recv.guard_intact()) << "wrote past the buffers";
            EXPECT_EQ(send.data, original) << "the send buffer was modified";
            std::string report;
            EXPECT_EQ(test::count_not_input(dtype, rrSum, root, seed, out, static_cast<size_t>(g_rank) * recvcount,
                                            recvcount, &report), 0u) << report;
          }
        }
      }
    }
  }
}

TEST(StagedAllToAll, EveryPairExchangesItsBlock) {
  memory::HostCopyEngine engine(std::chrono::microseconds(50));
  const size_t ranks = static_cast<size_t>(g_size);
  uint64_t seed = 800;
  for (rrDataType_t dtype : {rrInt8, rrFloat32, rrUint64}) {
    for (size_t segment_bytes : kSegmentBytes) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{9}, size_t{517}}) {
        SCOPED_TRACE(describe("all-to-all", dtype, rrSum, count, segment_bytes, false));
        StagedCollectives staged(g_comm.get(), &engine, segment_bytes);
        ASSERT_TRUE(staged.init().ok());
        const size_t elem = reduce::dtype_size(dtype);
        Buffer send(count * elem * ranks), recv(count * elem * ranks);
        test::fill(dtype, rrSum, g_rank, ++seed, send.get(), 0, count * ranks);
        const std::vector<uint8_t> original = send.data;
        Status done = staged.run_now(staged.all_to_all(send.get(), recv.get(), count, dtype));
        ASSERT_TRUE(done.ok()) << done.message();
        EXPECT_TRUE(send.guard_intact() && recv.guard_intact()) << "wrote past the buffers";
        EXPECT_EQ(send.data, original) << "the send buffer was modified";
        // Block p of this rank's recvbuff is block `rank` of rank p's sendbuff.
        std::string report;
        size_t wrong = 0;
        for (size_t p = 0; p < ranks; ++p) {
          wrong += test::count_not_input(dtype, rrSum, static_cast<int>(p), seed, block(recv.get(), p, count, elem),
                                         static_cast<size_t>(g_rank) * count, count, &report);
        }
        EXPECT_EQ(wrong, 0u) << report;
      }
    }
  }
}

// All-to-all and gather on one queue, as CUDA streams sharing a hardware
// queue, that holds only a few operations (a full launch queue).
TEST(StagedAllToAll, LanesSharingOneQueueOnlySerialize) {
  memory::HostCopyEngine engine(std::chrono::microseconds(100), /*one_queue=*/true, /*capacity=*/4);
  const size_t ranks = static_cast<size_t>(g_size);
  StagedCollectives staged(g_comm.get(), &engine, 64);
  ASSERT_TRUE(staged.init().ok());
  const size_t count = 301;
  Buffer send(count * 4 * ranks), recv(count * 4 * ranks), gathered(count * 4 * ranks);
  test::fill(rrInt32, rrSum, g_rank, 900, send.get(), 0, count * ranks);
  Status done = staged.run_now(staged.all_to_all(send.get(), recv.get(), count, rrInt32));
  ASSERT_TRUE(done.ok()) << done.message();
  done = staged.run_now(staged.gather(send.get(), gathered.get(), count, rrInt32, 0));
  ASSERT_TRUE(done.ok()) << done.message();
  std::string report;
  size_t wrong = 0;
  for (size_t p = 0; p < ranks; ++p) {
    wrong += test::count_not_input(rrInt32, rrSum, static_cast<int>(p), 900, block(recv.get(), p, count, 4),
                                   static_cast<size_t>(g_rank) * count, count, &report);
    if (g_rank == 0) {
      wrong += test::count_not_input(rrInt32, rrSum, static_cast<int>(p), 900, block(gathered.get(), p, count, 4), 0,
                                     count, &report);
    }
  }
  EXPECT_EQ(wrong, 0u) << report;
}

}  // namespace
}  // namespace rr

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new rr::CommEnvironment);
  return RUN_ALL_TESTS();
}
