// reduce::stream_copy, the slot rings' non-temporal copy into a large output.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reduce/stream_copy.hpp"

namespace {

// The non-temporal copy: every length around its 16- and 64-byte steps, at
// every alignment of source and destination, bytes outside left alone.
TEST(StreamCopy, CopiesEveryLengthAtEveryAlignment) {
  std::mt19937 rng(5);
  std::vector<uint8_t> src(512 + 32), dst(512 + 64);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  for (size_t src_off = 0; src_off < 16; src_off += 3) {
    for (size_t dst_off = 0; dst_off < 16; ++dst_off) {
      for (size_t bytes = 0; bytes <= 300; ++bytes) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        rr::reduce::stream_copy(dst.data() + dst_off, src.data() + src_off, bytes);
        ASSERT_EQ(std::memcmp(dst.data() + dst_off, src.data() + src_off, bytes), 0)
            << bytes << " bytes, offsets " << src_off << "/" << dst_off;
        for (size_t i = 0; i < dst.size(); ++i) {
          if (i < dst_off || i >= dst_off + bytes) {
            ASSERT_EQ(dst[i], 0xEE) << "byte " << i << " written";
          }
        }
      }
    }
  }
}

}  // namespace
