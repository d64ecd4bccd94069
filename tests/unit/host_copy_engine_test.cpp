// memory::HostCopyEngine, the copy engine the staging pipeline is tested on:
// its copies run behind the caller's back, in issue order per lane, and a
// marker completes only after everything issued on its lane before it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "memory/host_copy_engine.hpp"

namespace rr::memory {
namespace {

TEST(HostCopyEngine, MarkerCompletesAfterTheCopiesBeforeIt) {
  HostCopyEngine engine(std::chrono::milliseconds(20));
  std::vector<uint8_t> src(64), dst(64, 0);
  std::iota(src.begin(), src.end(), uint8_t{1});
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data(), src.data(), 32)).ok());
  ASSERT_TRUE(engine.copy(Lane::kToHost, contiguous(dst.data() + 32, src.data() + 32, 32)).ok());
  ASSERT_TRUE(engine.record(Lane::kToHost, 3).ok());
  bool done = true;
  ASSERT_TRUE(engine.query(3, &done).ok());
  EXPECT_FALSE(done) << "the copies take 40 ms: the marker cannot be complete yet";
  ASSERT_TRUE(engine.wait(3).ok());
  ASSERT_TRUE(engine.query(3, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(engine.copies(), 2u);
}

TEST(HostCopyEngine, LanesRunApart) {
  // A slow lane does not hold the other one up.
  HostCopyEngine engine(std::chrono::milliseconds(100));
  std::vector<uint8_t> a(8, 1), b(8, 0);
  ASSERT_TRUE(engine.copy(Lane::kToDevice, contiguous(b.data(), a.data(), 8)).ok());
  ASSERT_TRUE(engine.record(Lane::kToDevice, 0).ok());
  ASSERT_TRUE(engine.record(Lane::kToHost, 1).ok());
  ASSERT_TRUE(engine.wait(1).ok());
  bool done = true;
  ASSERT_TRUE(engine.query(0, &done).ok());
  EXPECT_FALSE(done);
  ASSERT_TRUE(engine.wait(0).ok());
  EXPECT_EQ(b, a);
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
  bool done = false;
  ASSERT_TRUE(engine.query(5, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_TRUE(engine.wait(5).ok());
  EXPECT_FALSE(engine.record(Lane::kToHost, CopyEngine::kMarkers).ok());
  EXPECT_FALSE(engine.wait(-1).ok());
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
