#include "topo/numa.hpp"

#include <cstdio>
#include <string>
#include <utility>

#include "topo/topology.hpp"

namespace rr::topo {

#if RR_HAVE_HWLOC

int numa_node_of_pci(const std::string& busid, std::string* why) {
  // domain:bus:device.function in hex digits only (scanf's %x would also
  // take a "0x" and a sign), the whole string.
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  int used = -1;
  const bool digits = !busid.empty() && busid.find_first_not_of("0123456789abcdefABCDEF:.") == std::string::npos;
  if (!digits || std::sscanf(busid.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &dev, &func, &used) != 4 ||
      used != static_cast<int>(busid.size()) || bus > 0xff || dev > 0x1f || func > 0x7) {
    *why = "'" + busid + "' is not a PCI bus id such as 0000:3b:00.0";
    return -1;
  }
  Topology topology;
  if (!topology.get()) {
    *why = "hwloc could not load the machine's topology";
    return -1;
  }
  hwloc_obj_t device = hwloc_get_pcidev_by_busid(topology.get(), domain, bus, dev, func);
  if (!device) {
    *why = "hwloc sees no PCI device " + busid;
    return -1;
  }
  hwloc_const_nodeset_t nodes = topology.nodes_near(device);
  if (!nodes || hwloc_bitmap_iszero(nodes)) {
    *why = "hwloc knows no memory node near " + busid;
    return -1;
  }
  if (hwloc_bitmap_weight(nodes) != 1) {
    *why = busid + " is equally near several NUMA nodes";
    return -1;
  }
  return hwloc_bitmap_first(nodes);
}

int numa_node_of_this_process(std::string* why) {
  static const std::pair<int, std::string> answer = []() -> std::pair<int, std::string> {
    Topology topology(false);
    if (!topology.get()) return {-1, "hwloc could not load the machine's topology"};
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
    std::pair<int, std::string> result{-1, ""};
    if (!cpus || !nodes || hwloc_get_cpubind(topology.get(), cpus, HWLOC_CPUBIND_PROCESS) != 0) {
      result.second = "hwloc cannot read this process's CPU binding";
    } else {
      hwloc_cpuset_to_nodeset(topology.get(), cpus, nodes);
      const int weight = hwloc_bitmap_weight(nodes);
      if (weight == 1) {
        result.first = hwloc_bitmap_first(nodes);
      } else {
        result.second = weight > 1 ? "the process may run on " + std::to_string(weight) + " NUMA nodes (bind it to one)"
                                   : "hwloc knows no NUMA node under this process's CPUs";
      }
    }
    if (cpus) hwloc_bitmap_free(cpus);
    if (nodes) hwloc_bitmap_free(nodes);
    return result;
  }();
  if (answer.first < 0) *why = answer.second;
  return answer.first;
}

#else

int numa_node_of_pci(const std::string& busid, std::string* why) {
  *why = "this ringreduce was built without hwloc, so it cannot place memory near " + busid;
  return -1;
}

int numa_node_of_this_process(std::string* why) {
  *why = "this ringreduce was built without hwloc";
  return -1;
}

#endif

}  // namespace rr::topo
