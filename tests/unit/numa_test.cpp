// topo::numa_node_of_pci against the kernel's own answer, and the staging
// pool's NUMA placement read back page by page.

#include <gtest/gtest.h>

#include <dirent.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "memory/staging_pool.hpp"
#include "topo/numa.hpp"

namespace rr {
namespace {

std::vector<std::string> pci_devices() {
  std::vector<std::string> found;
  if (DIR* dir = opendir("/sys/bus/pci/devices")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') found.emplace_back(entry->d_name);
    }
    closedir(dir);
  }
  return found;
}

// The node the kernel reports for a device: -1 where it has no NUMA information.
int sysfs_node(const std::string& busid) {
  std::ifstream file("/sys/bus/pci/devices/" + busid + "/numa_node");
  int node = -1;
  file >> node;
  return node;
}

bool built_without_hwloc(const std::string& why) { return why.find("without hwloc") != std::string::npos; }

TEST(Numa, EveryPciDeviceHasANodeTheKernelAgreesWith) {
  const std::vector<std::string> devices = pci_devices();
  if (devices.empty()) GTEST_SKIP() << "this machine shows no PCI devices in /sys/bus/pci/devices";
  for (const std::string& busid : devices) {
    std::string why;
    const int node = topo::numa_node_of_pci(busid, &why);
    if (built_without_hwloc(why)) {
      GTEST_SKIP() << why;
    }
    ASSERT_GE(node, 0) << busid << ": " << why;
    // Where the kernel knows the device's node, hwloc must name the same one.
    const int kernel = sysfs_node(busid);
    if (kernel >= 0) {
      EXPECT_EQ(node, kernel) << busid;
    }
  }
}

TEST(Numa, UnknownAndMalformedIdsAreNamed) {
  for (const std::string busid : {"ffff:ff:1f.7", "0000:00:00.0x", "nonsense", "0000:00:20.0", "0x00:00:00.0", ""}) {
    std::string why;
    EXPECT_EQ(topo::numa_node_of_pci(busid, &why), -1) << busid;
    EXPECT_NE(why.find(busid.empty() ? "''" : busid), std::string::npos) << busid << ": " << why;
  }
}

int page_node(const void* address) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(address), MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    return -2;
  }
  return node;
}

TEST(Numa, StagingPoolPagesAreOnTheNodeAskedFor) {
  memory::StagingPool pool;
  ASSERT_TRUE(pool.reserve(3 * 4096 + 5, 4, 0).ok());
  ASSERT_EQ(pool.numa_node(), 0) << pool.placement();
  EXPECT_EQ(pool.placement(), "NUMA node 0");
  const auto* base = static_cast<const uint8_t*>(pool.data());
  for (size_t offset = 0; offset < pool.bytes(); offset += 4096) {
    ASSERT_EQ(page_node(base + offset), 0) << "page at offset " << offset;
  }
}

TEST(Numa, ARefusedNodeLeavesUsableFirstTouchMemory) {
  memory::StagingPool pool;
  ASSERT_TRUE(pool.reserve(4096, 2, 1000).ok());  // no machine here has node 1000
  EXPECT_EQ(pool.numa_node(), -1);
  EXPECT_NE(pool.placement().find("mbind to NUMA node 1000"), std::string::npos) << pool.placement();
  std::memset(pool.slot(1), 0x5A, pool.slot_bytes());
  EXPECT_EQ(static_cast<const uint8_t*>(pool.slot(1))[pool.slot_bytes() - 1], 0x5A);

  memory::StagingPool plain;
  ASSERT_TRUE(plain.reserve(4096, 1).ok());
  EXPECT_EQ(plain.numa_node(), -1);
  EXPECT_EQ(plain.placement(), "first touch");
}

TEST(Numa, AKeptPoolIsRemadeForAnotherNode) {
  memory::StagingPool pool;
  ASSERT_TRUE(pool.reserve(4096, 2).ok());
  ASSERT_EQ(pool.allocations(), 1u);
  ASSERT_TRUE(pool.reserve(4096, 2, 0).ok());
  EXPECT_EQ(pool.allocations(), 2u);
  EXPECT_EQ(pool.numa_node(), 0);
  ASSERT_TRUE(pool.reserve(4096, 1, 0).ok());  // smaller, same node: kept
  EXPECT_EQ(pool.allocations(), 2u);
}

}  // namespace
}  // namespace rr
