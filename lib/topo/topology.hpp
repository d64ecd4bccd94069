#pragma once
// The one owner of an hwloc topology inside topo/: loaded with every PCI
// device and the OS devices (network interfaces, InfiniBand HCAs, GPUs)
// hwloc finds under them, freed on every path. Only for topo/'s own .cpp
// files, and only in a build with hwloc (RR_HAVE_HWLOC).

#if RR_HAVE_HWLOC

#include <hwloc.h>

namespace rr::topo {

class Topology {
 public:
  // `with_io`: also the devices (slower to load); without, cores and memory only.
  explicit Topology(bool with_io = true) {
    if (hwloc_topology_init(&topology_) != 0) {
      topology_ = nullptr;
      return;
    }
    // Every PCI device (hwloc keeps only "important" ones by default), and
    // the bridges that lead to them.
    if (with_io) {
      hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
      hwloc_topology_set_type_filter(topology_, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    }
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

  // Null when hwloc could not load the machine's topology.
  hwloc_topology_t get() const { return topology_; }

  // The NUMA nodes nearest an I/O object (a PCI or OS device): those of its
  // first ancestor that is not an I/O object. Null or empty when hwloc knows
  // none.
  hwloc_const_nodeset_t nodes_near(hwloc_obj_t io_object) const {
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology_, io_object);
    return parent ? parent->nodeset : nullptr;
  }

 private:
  hwloc_topology_t topology_ = nullptr;
};

}  // namespace rr::topo

#endif  // RR_HAVE_HWLOC
