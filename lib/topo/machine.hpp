#pragma once
// What this host is made of, as hwloc reads it: NUMA nodes with their cores
// and memory, and the GPUs and network devices with the NUMA node each is
// nearest to. For people (rr-info prints it); placement decisions use
// topo/numa.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace rr::topo {

struct NumaNode {
  unsigned os_index = 0;
  uint64_t memory_bytes = 0;  // 0 when hwloc does not know it
  int cores = 0;
  int pus = 0;          // hardware threads
  std::string cpus;     // their OS indices as a list: "0-15,32-47"
};

// A GPU (a PCI display or 3D controller from NVIDIA or AMD, or a processing
// accelerator) or a network device (an interface such as eth0, or an RDMA
// device such as mlx5_0).
struct Device {
  std::string name;     // the OS's name for it ("eth0", "mlx5_0", "cuda0"); for a GPU hwloc has
                        // no OS device for, its PCI bus id
  std::string busid;    // "0000:3b:00.0"
  std::string model;    // hwloc's vendor and model names, where it has them
  std::string numa;     // the nearest NUMA nodes ("0", "0-1"), empty when unknown
};

struct Machine {
  std::string hwloc_version;  // of the library loaded at run time
  int cores = 0;
  int pus = 0;
  std::vector<NumaNode> numa_nodes;
  std::vector<Device> gpus;
  std::vector<Device> nics;
};

// kSystemError when this build has no hwloc or hwloc cannot read the
// machine; *out is written only on success.
Status describe_machine(Machine* out);

}  // namespace rr::topo
