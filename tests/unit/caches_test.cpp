// The last-level cache as sysfs describes it (topo/caches.hpp): sizes as the
// kernel writes them, the largest data or unified level of a CPU's cache
// directory (instruction caches skipped), and nothing where it says nothing.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "topo/caches.hpp"

namespace {

namespace fs = std::filesystem;

// A fake ".../cpuN/cache" with the given indices: {level, type, size}.
struct FakeCaches {
  fs::path dir;
  FakeCaches() {
    char name[] = "/tmp/rr-caches-XXXXXX";
    dir = mkdtemp(name);
  }
  ~FakeCaches() { fs::remove_all(dir); }
  void add(int index, const char* level, const char* type, const char* size) {
    const fs::path d = dir / ("index" + std::to_string(index));
    fs::create_directories(d);
    std::ofstream(d / "level") << level << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  }
};

}  // namespace

TEST(Caches, SizesAsSysfsWritesThem) {
  EXPECT_EQ(rr::topo::parse_cache_size("32768K"), size_t{32} << 20);
  EXPECT_EQ(rr::topo::parse_cache_size("1M"), size_t{1} << 20);
  EXPECT_EQ(rr::topo::parse_cache_size("512"), 512u);
  EXPECT_EQ(rr::topo::parse_cache_size(""), 0u);
  EXPECT_EQ(rr::topo::parse_cache_size("K"), 0u);
  EXPECT_EQ(rr::topo::parse_cache_size("12Q"), 0u);
}

TEST(Caches, TheLargestDataOrUnifiedLevel) {
  FakeCaches caches;
  caches.add(0, "1", "Data", "32K");
  caches.add(1, "1", "Instruction", "32K");
  caches.add(2, "2", "Unified", "1024K");
  caches.add(3, "3", "Unified", "32768K");
  EXPECT_EQ(rr::topo::last_level_cache_bytes_in(caches.dir.string()), size_t{32} << 20);
}

TEST(Caches, AnInstructionCacheIsNeverTheLastLevel) {
  FakeCaches caches;
  caches.add(0, "1", "Data", "48K");
  caches.add(1, "2", "Unified", "2048K");
  caches.add(2, "3", "Instruction", "65536K");  // no such machine; the type decides
  EXPECT_EQ(rr::topo::last_level_cache_bytes_in(caches.dir.string()), size_t{2} << 20);
}

TEST(Caches, NothingWhereSysfsSaysNothing) {
  FakeCaches caches;
  EXPECT_EQ(rr::topo::last_level_cache_bytes_in(caches.dir.string()), 0u);
  EXPECT_EQ(rr::topo::last_level_cache_bytes_in("/nonexistent/cache"), 0u);
}

TEST(Caches, ThisMachineReportsOneOrSaysNothing) {
  // Whatever this machine is, the answer is a plausible cache or 0.
  const size_t bytes = rr::topo::last_level_cache_bytes();
  EXPECT_TRUE(bytes == 0 || (bytes >= (size_t{64} << 10) && bytes <= (size_t{4} << 30))) << bytes;
}
