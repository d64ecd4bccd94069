// memory::HostCopyEngine, the copy engine the staging pipeline is tested on:
// its lanes run behind the caller's back, in issue order per lane; markers,
// signals and releases order work across lanes and with the host; with one
// queue, a wait holds everything issued after it on either lane.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

#include "memory/host_copy_engine.hpp"

namespace rr::memory {
namespace {

using std::chrono::milliseconds;

Reduction reduction_of(void* dst, const void* mine, const void* arrived, size_t count) {
  Reduction r;
  r.dst = dst;
  r.mine = mine;
  r.arrived = arrived;
  r.count = count;
  return r;
}

TEST(HostCopyEngine, MarkerCompletesAfterTheCopiesBeforeIt) {
  HostCopyEngine engine(milliseconds(20));
  std::vector<uint8_t> src(64), dst(64, 0);
  std::iota(src.begin(), src.end(), uint8_t{1});
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data(), src.data(), 32)).ok());
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data() + 32, src.data() + 32, 32)).ok());
  ASSERT_TRUE(engine.record(Lane::kToHost, 3).ok());
  ASSERT_TRUE(engine.wait(3).ok());
  EXPECT_EQ(dst, src) << "the marker completed before the copies issued ahead of it";
  EXPECT_EQ(engine.copies(), 2u);
}

TEST(HostCopyEngine, SignalComesAfterTheCopiesBeforeIt) {
  HostCopyEngine engine(milliseconds(30));
  std::vector<uint8_t> src(16, 7), dst(16, 0);
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data(), src.data(), 16)).ok());
  ASSERT_TRUE(engine.signal(Lane::kToHost, 4).ok());
  EXPECT_EQ(engine.arrived(), 0u) << "the copy before the signal takes 30 ms";
  ASSERT_TRUE(engine.wait_arrived(4, {}).ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(engine.arrived(), 4u);
}

TEST(HostCopyEngine, WaitReleaseHoldsItsLaneOnlyUntilReleased) {
  HostCopyEngine engine;
  std::vector<uint8_t> src(8, 3), dst(8, 0), other(8, 0);
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 2).ok());
  ASSERT_TRUE(engine.copy(Lane::kToDevice, contiguous(dst.data(), src.data(), 8)).ok());
  ASSERT_TRUE(engine.record(Lane::kToDevice, 0).ok());
  // The other lane goes on meanwhile.
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(other.data(), src.data(), 8)).ok());
  ASSERT_TRUE(engine.signal(Lane::kToHost, 1).ok());
  ASSERT_TRUE(engine.wait_arrived(1, {}).ok());
  EXPECT_EQ(other, src);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(dst, std::vector<uint8_t>(8, 0)) << "the copy ran before its release";
  engine.release(1);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(dst, std::vector<uint8_t>(8, 0)) << "released 1, but it waits for 2";
  engine.release(2);
  ASSERT_TRUE(engine.wait(0).ok());
  EXPECT_EQ(dst, src);
  engine.release(1);  // never goes back
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 2).ok());
  ASSERT_TRUE(engine.record(Lane::kToDevice, 0).ok());
  EXPECT_TRUE(engine.wait(0).ok());
}

TEST(HostCopyEngine, AfterWaitsForTheMarkerAsRecordedBeforeIt) {
  HostCopyEngine engine;
  std::vector<uint8_t> src(8, 9), mid(8, 0), dst(8, 0);
  // kToDevice: [wait for the host] src -> mid, marker 1.
  // kToHost:   after marker 1, mid -> dst, signal.
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 1).ok());
  ASSERT_TRUE(engine.copy(Lane::kToDevice, contiguous(mid.data(), src.data(), 8)).ok());
  ASSERT_TRUE(engine.record(Lane::kToDevice, 1).ok());
  ASSERT_TRUE(engine.after(Lane::kToHost, 1).ok());
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data(), mid.data(), 8)).ok());
  ASSERT_TRUE(engine.signal(Lane::kToHost, 1).ok());
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(engine.arrived(), 0u) << "after() let the lane pass a marker not yet reached";
  engine.release(1);
  ASSERT_TRUE(engine.wait_arrived(1, {}).ok());
  EXPECT_EQ(dst, src);
  // A marker recorded after the after() does not hold it; one never recorded neither.
  ASSERT_TRUE(engine.after(Lane::kToHost, 6).ok());
  ASSERT_TRUE(engine.after(Lane::kToHost, 1).ok());
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 2).ok());
  ASSERT_TRUE(engine.record(Lane::kToDevice, 1).ok());
  ASSERT_TRUE(engine.signal(Lane::kToHost, 2).ok());
  EXPECT_TRUE(engine.wait_arrived(2, {}).ok());
  engine.release(2);
}

TEST(HostCopyEngine, ACountFarPastTheWaitDoesNotPassItAsOnTheGpu) {
  // cuStreamWaitValue64 compares cyclically: a release of 2^64 - 1 is -1
  // past a wait for 5 there, and holds it. Teardown releases the last count
  // handed out instead.
  HostCopyEngine engine;
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 5).ok());
  ASSERT_TRUE(engine.signal(Lane::kToDevice, 1).ok());
  engine.release(~uint64_t{0});
  int asked = 0;
  EXPECT_FALSE(engine.wait_arrived(1, [&] { return ++asked > 5; }).ok());
  EXPECT_TRUE(reached(5, 5) && reached(6, 5) && !reached(4, 5) && !reached(~uint64_t{0}, 5));
  EXPECT_EQ(engine.take_counts(3), 1u);
  EXPECT_EQ(engine.take_counts(2), 4u);
  EXPECT_EQ(engine.issued(), 5u);
}

TEST(HostCopyEngine, OneQueueHoldsTheOtherLaneBehindAWait) {
  // Issued wait-first, a signal the host needs sits behind the wait: the
  // order the staging pipeline never issues in.
  HostCopyEngine engine(milliseconds(0), /*one_queue=*/true);
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 1).ok());
  ASSERT_TRUE(engine.signal(Lane::kToHost, 1).ok());
  int asked = 0;
  Status gave_up = engine.wait_arrived(1, [&] { return ++asked > 5; });
  EXPECT_EQ(gave_up.code(), Code::kInvalidUsage);
  EXPECT_NE(gave_up.message().find("gave up"), std::string::npos) << gave_up.message();
  engine.release(1);
  EXPECT_TRUE(engine.wait_arrived(1, {}).ok());
}

// As a full CUDA launch queue: the third operation on a lane of capacity 2
// waits until one of the two ahead of it is done; other lanes take work.
TEST(HostCopyEngine, IssuingOnAFullLaneBlocksUntilItDrains) {
  HostCopyEngine engine(milliseconds(0), /*one_queue=*/false, /*capacity=*/2);
  std::vector<uint8_t> src(8, 5), dst(8, 0), other(8, 0);
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 1).ok());
  ASSERT_TRUE(engine.copy(Lane::kToDevice, contiguous(dst.data(), src.data(), 8)).ok());
  std::atomic<bool> issued{false};
  std::thread issuer([&] {
    ASSERT_TRUE(engine.record(Lane::kToDevice, 0).ok());
    issued = true;
  });
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(other.data(), src.data(), 8)).ok());
  ASSERT_TRUE(engine.record(Lane::kToHost, 1).ok());
  ASSERT_TRUE(engine.wait(1).ok());
  EXPECT_EQ(other, src) << "another lane has room";
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(issued) << "issued onto a full lane";
  engine.release(1);
  issuer.join();
  EXPECT_TRUE(issued);
  ASSERT_TRUE(engine.wait(0).ok());
  EXPECT_EQ(dst, src);
}

TEST(HostCopyEngine, AServerRunsItsSegmentsReductionsAndLeavesLaterOnesToTheNext) {
  HostCopyEngine engine;
  std::vector<int32_t> mine{1, 2, 3}, arrived{10, 20, 30}, dst(3, 0);
  Reduction r = reduction_of(dst.data(), mine.data(), arrived.data(), 3);
  // Servers of segments 1 and 2, one after the other on their lane.
  ASSERT_TRUE(engine.serve_reductions(Lane::kReduce, 1, rrInt32, rrSum).ok());
  ASSERT_TRUE(engine.serve_reductions(Lane::kReduce, 2, rrInt32, rrMax).ok());
  ASSERT_TRUE(engine.post_reduction(1, r, 5000, {}).ok());
  EXPECT_EQ(dst, (std::vector<int32_t>{11, 22, 33}));
  // A job of segment 2 ends server 1 without being run by it: server 2 runs it (max).
  ASSERT_TRUE(engine.post_reduction(2, r, 5000, {}).ok());
  EXPECT_EQ(dst, (std::vector<int32_t>{10, 20, 30}));
  r.last = true;  // avg's division applies to rrAvg only
  ASSERT_TRUE(engine.post_reduction(2, r, 5000, {}).ok());
  EXPECT_EQ(engine.reductions(), 3u);
  // Ended: the server of segment 2 exits, and what follows it on the lane runs.
  engine.end_reductions(2);
  ASSERT_TRUE(engine.record(Lane::kReduce, 2).ok());
  EXPECT_TRUE(engine.wait(2).ok());
}

TEST(HostCopyEngine, AReductionNoServerTakesTimesOut) {
  HostCopyEngine engine;
  std::vector<float> a(4, 1.0f), b(4, 2.0f), dst(4, 0.0f);
  const Reduction r = reduction_of(dst.data(), a.data(), b.data(), 4);
  const Status late = engine.post_reduction(7, r, 30, {});
  EXPECT_EQ(late.code(), Code::kTimeout);
  EXPECT_NE(late.message().find("segment 7"), std::string::npos) << late.message();
}

TEST(HostCopyEngine, AnAbortEndsTheWaitForAReduction) {
  HostCopyEngine engine;
  std::vector<float> a(4, 1.0f), b(4, 2.0f), dst(4, 0.0f);
  const Reduction r = reduction_of(dst.data(), a.data(), b.data(), 4);
  int asked = 0;
  const Status aborted = engine.post_reduction(3, r, 60000, [&] { return ++asked > 3; });
  EXPECT_EQ(aborted.code(), Code::kInvalidUsage);
  EXPECT_NE(aborted.message().find("gave up"), std::string::npos) << aborted.message();
}

TEST(HostCopyEngine, StridedCopyMovesRowsBetweenPitches) {
  HostCopyEngine engine;
  // 3 rows of 4 bytes, 10 bytes apart in the source, packed in the destination.
  std::vector<uint8_t> src(30), dst(12, 0);
  std::iota(src.begin(), src.end(), uint8_t{0});
  ASSERT_TRUE(engine.copy(Lane::kToHost, Copy{dst.data(), 4, src.data() + 2, 10, 4, 3}).ok());
  ASSERT_TRUE(engine.record(Lane::kToHost, 0).ok());
  ASSERT_TRUE(engine.wait(0).ok());
  EXPECT_EQ(dst, (std::vector<uint8_t>{2, 3, 4, 5, 12, 13, 14, 15, 22, 23, 24, 25}));
}

TEST(HostCopyEngine, MarkerNeverRecordedIsCompleteAndOutOfRangeIsRefused) {
  HostCopyEngine engine;
  EXPECT_TRUE(engine.wait(5).ok());
  EXPECT_FALSE(engine.record(Lane::kToHost, CopyEngine::kMarkers).ok());
  EXPECT_FALSE(engine.after(Lane::kToHost, -1).ok());
  EXPECT_FALSE(engine.wait(-1).ok());
}

TEST(HostCopyEngine, DestroyedWhileALaneWaitsDoesNotHang) {
  HostCopyEngine engine;
  ASSERT_TRUE(engine.wait_release(Lane::kToDevice, 1).ok());
}

TEST(HostCopyEngine, SlotsAreMadeOnceAndKept) {
  HostCopyEngine engine;
  ASSERT_TRUE(engine.reserve_slots(1000, 3).ok());
  void* first = engine.slot(0);
  ASSERT_TRUE(engine.reserve_slots(500, 3).ok());
  EXPECT_EQ(engine.slot(0), first);
  EXPECT_EQ(engine.slots(), 3u);
}

}  // namespace
}  // namespace rr::memory
