#include "topo/numa.hpp"

#include <cstdio>

#if RR_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace rr::topo {

#if RR_HAVE_HWLOC

namespace {

// An hwloc topology with the PCI devices in it, freed on every path.
class Topology {
 public:
  Topology() {
    if (hwloc_topology_init(&topology_) != 0) {
      topology_ = nullptr;
      return;
    }
    // Every PCI device (hwloc keeps only "important" ones by default), and
    // the bridges that lead to them.
    hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(topology_, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_load(topology_) != 0) {
      hwloc_topology_destroy(topology_);
      topology_ = nullptr;
    }
  }
  ~Topology() {
    if (topology_) hwloc_topology_destroy(topology_);
  }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

}  // namespace

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
  // The first ancestor that is not an I/O object holds the device's locality.
  hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology.get(), device);
  if (!parent || !parent->nodeset || hwloc_bitmap_iszero(parent->nodeset)) {
    *why = "hwloc knows no memory node near " + busid;
    return -1;
  }
  if (hwloc_bitmap_weight(parent->nodeset) != 1) {
    *why = busid + " is equally near several NUMA nodes";
    return -1;
  }
  return hwloc_bitmap_first(parent->nodeset);
}

#else

int numa_node_of_pci(const std::string& busid, std::string* why) {
  *why = "this ringreduce was built without hwloc, so it cannot place memory near " + busid;
  return -1;
}

#endif

}  // namespace rr::topo
