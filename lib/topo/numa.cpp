#include "topo/numa.hpp"

#include <cstdio>

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

#else

int numa_node_of_pci(const std::string& busid, std::string* why) {
  *why = "this ringreduce was built without hwloc, so it cannot place memory near " + busid;
  return -1;
}

#endif

}  // namespace rr::topo
