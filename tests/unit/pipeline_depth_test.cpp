// The ring's pipeline depth for a link (algo/pipeline.hpp) as arithmetic,
// UCX_NET_DEVICES' parsing (topo/link_speed.hpp), and RR_PIPELINE_DEPTH /
// RR_LINK_GBPS / config.pipeline_depth as resolve_settings reads them
// (comm/settings.hpp).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "algo/pipeline.hpp"
#include "comm/settings.hpp"
#include "ringreduce/ringreduce.h"
#include "topo/link_speed.hpp"

namespace {

using rr::Settings;
using rr::algo::depth_for_link;
using rr::algo::PipelineChoice;

constexpr double kGbit = 1e9 / 8;  // bytes/s in 1 Gbit/s
constexpr size_t kChunk = size_t{512} << 10;
constexpr int kFloor = Settings::kDefaultPipelineDepth;
constexpr int kCap = Settings::kMaxPipelineDepth;

TEST(DepthForLink, OneGbitTwentyMs) {
  // 1 + ceil(1.5 x 125e6 x 0.010 / 524288) = 1 + ceil(3.58) = 5
  const PipelineChoice c = depth_for_link(0.020, 1 * kGbit, kChunk, kFloor, kCap);
  EXPECT_EQ(c.depth, 5);
  EXPECT_FALSE(c.capped);
}

TEST(DepthForLink, OneGbitFiftyMs) {
  // 1 + ceil(1.5 x 125e6 x 0.025 / 524288) = 1 + ceil(8.94) = 10
  const PipelineChoice c = depth_for_link(0.050, 1 * kGbit, kChunk, kFloor, kCap);
  EXPECT_EQ(c.depth, 10);
  EXPECT_FALSE(c.capped);
}

TEST(DepthForLink, FloorWinsOnALan) {
  // 100 us: 1 + ceil(0.018) = 2 < 4
  const PipelineChoice c = depth_for_link(100e-6, 1 * kGbit, kChunk, kFloor, kCap);
  EXPECT_EQ(c.depth, kFloor);
  EXPECT_FALSE(c.capped);
  // Without the floor the formula's own answer shows.
  EXPECT_EQ(depth_for_link(100e-6, 1 * kGbit, kChunk, 1, kCap).depth, 2);
}

TEST(DepthForLink, CapAndCappedFlag) {
  // 100 Gbit/s, 20 ms: 1 + ceil(357.6) = 359 > 64
  const PipelineChoice c = depth_for_link(0.020, 100 * kGbit, kChunk, kFloor, kCap);
  EXPECT_EQ(c.depth, kCap);
  EXPECT_TRUE(c.capped);
  // Exactly at the cap is not capped: 1.5 x 2 B/s x 21 s / 1 B = 63 columns,
  // all exact in doubles, so 1 + 63 = 64.
  const PipelineChoice at = depth_for_link(42.0, 2.0, 1, kFloor, kCap);
  EXPECT_EQ(at.depth, kCap);
  EXPECT_FALSE(at.capped);
  const PipelineChoice past = depth_for_link(42.5, 2.0, 1, kFloor, kCap);
  EXPECT_EQ(past.depth, kCap);
  EXPECT_TRUE(past.capped);
  // Far past any int: still the cap.
  const PipelineChoice huge = depth_for_link(1e9, 1e15, 1, kFloor, kCap);
  EXPECT_EQ(huge.depth, kCap);
  EXPECT_TRUE(huge.capped);
}

TEST(DepthForLink, NoRttOrRateGivesTheFloor) {
  for (double rtt : {0.0, -0.020}) {
    const PipelineChoice c = depth_for_link(rtt, 1 * kGbit, kChunk, kFloor, kCap);
    EXPECT_EQ(c.depth, kFloor) << rtt;
    EXPECT_FALSE(c.capped) << rtt;
  }
  for (double rate : {0.0, -1 * kGbit}) {
    const PipelineChoice c = depth_for_link(0.020, rate, kChunk, kFloor, kCap);
    EXPECT_EQ(c.depth, kFloor) << rate;
    EXPECT_FALSE(c.capped) << rate;
  }
  const PipelineChoice nan = depth_for_link(std::nan(""), 1 * kGbit, kChunk, kFloor, kCap);
  EXPECT_EQ(nan.depth, kFloor);
  EXPECT_FALSE(nan.capped);
}

TEST(DepthForLink, ZeroChunkGivesTheFloor) {
  const PipelineChoice c = depth_for_link(0.020, 100 * kGbit, 0, kFloor, kCap);
  EXPECT_EQ(c.depth, kFloor);
  EXPECT_FALSE(c.capped);
}

TEST(DepthForLink, MonotonicInRttAndRate) {
  const std::vector<double> rtts = {0, 50e-6, 100e-6, 1e-3, 5e-3, 10e-3, 20e-3, 50e-3, 100e-3, 300e-3, 1.0};
  const std::vector<double> gbits = {0.1, 1, 2.5, 10, 25, 40, 100, 200, 400};
  for (double g : gbits) {
    int last = 0;
    for (double rtt : rtts) {
      const PipelineChoice c = depth_for_link(rtt, g * kGbit, kChunk, kFloor, kCap);
      EXPECT_GE(c.depth, last) << g << " Gbit/s, rtt " << rtt;
      EXPECT_GE(c.depth, kFloor);
      EXPECT_LE(c.depth, kCap);
      last = c.depth;
    }
  }
  for (double rtt : rtts) {
    int last = 0;
    for (double g : gbits) {
      const PipelineChoice c = depth_for_link(rtt, g * kGbit, kChunk, kFloor, kCap);
      EXPECT_GE(c.depth, last) << g << " Gbit/s, rtt " << rtt;
      last = c.depth;
    }
  }
}

// Sets (or, with nullptr, unsets) an environment variable for one scope and
// puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_ = false;
  std::string old_;
};

// Every wave of columns full: the number of waves stays, the columns become
// depth x waves, no chunk grows, and the segment is still covered.
TEST(BalancedChunk, FillsTheLastWave) {
  // 16 MiB of floats at 512 KiB a chunk: 32 columns; depth 5 has 7 waves, 35 columns.
  const size_t segment = (size_t{16} << 20) / 4, chunk = kChunk / 4;
  const size_t balanced = rr::algo::balanced_chunk_elems(segment, chunk, 5);
  EXPECT_EQ(balanced, (segment + 34) / 35);
  EXPECT_EQ((segment + balanced - 1) / balanced, 35u);
  // Depth 4 divides 32 already: unchanged.
  EXPECT_EQ(rr::algo::balanced_chunk_elems(segment, chunk, 4), chunk);
}

TEST(BalancedChunk, OneWaveOrLessKeepsItsChunk) {
  EXPECT_EQ(rr::algo::balanced_chunk_elems(1000, 512, 4), 512u);   // 2 columns
  EXPECT_EQ(rr::algo::balanced_chunk_elems(2048, 512, 4), 512u);   // 4 columns
  EXPECT_EQ(rr::algo::balanced_chunk_elems(0, 512, 4), 512u);
  EXPECT_EQ(rr::algo::balanced_chunk_elems(1, 1, 4), 1u);
  EXPECT_EQ(rr::algo::balanced_chunk_elems(100, 0, 4), 0u);        // nothing to balance
}

TEST(BalancedChunk, SweepKeepsWavesFullAndChunksBounded) {
  for (size_t segment : {size_t{5}, size_t{17}, size_t{1000}, size_t{4097}, size_t{1} << 20, (size_t{1} << 24) + 3}) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{131072}}) {
      for (int depth : {1, 2, 3, 4, 5, 7, 11, 64}) {
        const size_t b = rr::algo::balanced_chunk_elems(segment, chunk, depth);
        SCOPED_TRACE("segment " + std::to_string(segment) + " chunk " + std::to_string(chunk) + " depth " +
                     std::to_string(depth) + " -> " + std::to_string(b));
        ASSERT_GE(b, 1u);
        ASSERT_LE(b, chunk);
        const size_t d = static_cast<size_t>(depth);
        const size_t before = (segment + chunk - 1) / chunk, after = (segment + b - 1) / b;
        if (before <= d) {
          EXPECT_EQ(b, chunk);
          continue;
        }
        // The same number of waves, and none of them with an idle slot but the
        // last, by less than one column per slot of the rounding.
        EXPECT_EQ((after + d - 1) / d, (before + d - 1) / d);
        EXPECT_GE(after, before);
        // Every wave exactly full wherever the segment has the elements for it
        // (S >= F (F - 1) makes ceil(S / ceil(S / F)) == F).
        const size_t full = d * ((before + d - 1) / d);
        if (segment >= full * (full - 1)) {
          EXPECT_EQ(after, full);
        }
      }
    }
  }
}

TEST(UcxNetDevices, Parsing) {
  {
    ScopedEnv e("UCX_NET_DEVICES", nullptr);
    EXPECT_TRUE(rr::topo::ucx_net_devices().empty());
  }
  {
    ScopedEnv e("UCX_NET_DEVICES", "all");
    EXPECT_TRUE(rr::topo::ucx_net_devices().empty());
  }
  {
    ScopedEnv e("UCX_NET_DEVICES", "eth0,mlx5_0:1");
    EXPECT_EQ(rr::topo::ucx_net_devices(), (std::vector<std::string>{"eth0", "mlx5_0"}));
  }
  {
    ScopedEnv e("UCX_NET_DEVICES", "mlx5_1:1");
    EXPECT_EQ(rr::topo::ucx_net_devices(), (std::vector<std::string>{"mlx5_1"}));
  }
}

// resolve_settings with only these two variables of interest set.
class PipelineSettings : public ::testing::Test {
 protected:
  ScopedEnv depth_{"RR_PIPELINE_DEPTH", nullptr};
  ScopedEnv gbps_{"RR_LINK_GBPS", nullptr};
};

TEST_F(PipelineSettings, DefaultIsAuto) {
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(nullptr, &s).ok());
  EXPECT_TRUE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth, 4);
  EXPECT_EQ(s.pipeline_depth_source.text(), "default");
  EXPECT_EQ(s.link_gbps, 0);
  EXPECT_EQ(s.link_gbps_source.text(), "default");
}

TEST_F(PipelineSettings, EnvAuto) {
  ScopedEnv e("RR_PIPELINE_DEPTH", "auto");
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(nullptr, &s).ok());
  EXPECT_TRUE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth, 4);
  EXPECT_EQ(s.pipeline_depth_source.text(), "env RR_PIPELINE_DEPTH");
}

TEST_F(PipelineSettings, EnvNumberFixesIt) {
  ScopedEnv e("RR_PIPELINE_DEPTH", "8");
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(nullptr, &s).ok());
  EXPECT_FALSE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth, 8);
  EXPECT_EQ(s.pipeline_depth_source.text(), "env RR_PIPELINE_DEPTH");
}

TEST_F(PipelineSettings, EnvBadValueNamesAuto) {
  for (const char* bad : {"0", "x", "65", "-3"}) {
    ScopedEnv e("RR_PIPELINE_DEPTH", bad);
    Settings s;
    const rr::Status st = rr::resolve_settings(nullptr, &s);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("RR_PIPELINE_DEPTH"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("auto"), std::string::npos) << st.message();
  }
}

TEST_F(PipelineSettings, ConfigFixesIt) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.pipeline_depth = 6;
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(&config, &s).ok());
  EXPECT_FALSE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth, 6);
  EXPECT_EQ(s.pipeline_depth_source.text(), "config");
}

TEST_F(PipelineSettings, ConfigLeftUndefKeepsAuto) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(&config, &s).ok());
  EXPECT_TRUE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth_source.text(), "default");
}

TEST_F(PipelineSettings, ConfigWinsOverEnvAuto) {
  ScopedEnv e("RR_PIPELINE_DEPTH", "auto");
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.pipeline_depth = 6;
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(&config, &s).ok());
  EXPECT_FALSE(s.pipeline_depth_auto);
  EXPECT_EQ(s.pipeline_depth, 6);
  EXPECT_EQ(s.pipeline_depth_source.text(), "config");
}

TEST_F(PipelineSettings, LinkGbpsFromEnv) {
  ScopedEnv e("RR_LINK_GBPS", "2.5");
  Settings s;
  ASSERT_TRUE(rr::resolve_settings(nullptr, &s).ok());
  EXPECT_DOUBLE_EQ(s.link_gbps, 2.5);
  EXPECT_EQ(s.link_gbps_source.text(), "env RR_LINK_GBPS");
}

TEST_F(PipelineSettings, LinkGbpsBadValue) {
  for (const char* bad : {"-1", "0", "fast"}) {
    ScopedEnv e("RR_LINK_GBPS", bad);
    Settings s;
    const rr::Status st = rr::resolve_settings(nullptr, &s);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("RR_LINK_GBPS"), std::string::npos) << st.message();
  }
}

}  // namespace
