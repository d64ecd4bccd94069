#include "topo/machine.hpp"

#include <cstdio>
#include <cstdlib>

#include "topo/topology.hpp"

namespace rr::topo {

#if RR_HAVE_HWLOC

namespace {

// "0-3,8" for a bitmap, empty for an empty or missing one.
std::string as_list(hwloc_const_bitmap_t set) {
  if (!set || hwloc_bitmap_iszero(set)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, set) < 0 || !text) return "";
  std::string list(text);
  std::free(text);
  return list;
}

std::string busid_of(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", a.domain, a.bus, a.dev, a.func);
  return text;
}

// hwloc's names for a PCI device's vendor and model ("Mellanox Technologies
// MT28908 Family [ConnectX-6]"), where it read them.
std::string model_of(hwloc_obj_t pci) {
  const char* vendor = hwloc_obj_get_info_by_name(pci, "PCIVendor");
  const char* device = hwloc_obj_get_info_by_name(pci, "PCIDevice");
  std::string model = vendor ? vendor : "";
  if (device) model += (model.empty() ? "" : " ") + std::string(device);
  return model;
}

// PCI base class 0x03 (display) from the GPU vendors, or 0x12 (processing
// accelerator). A server's on-board VGA (ASPEED, Matrox) is not a GPU here.
bool is_gpu(hwloc_obj_t pci) {
  constexpr unsigned kNvidia = 0x10de, kAmd = 0x1002;
  const unsigned base_class = pci->attr->pcidev.class_id >> 8;
  const unsigned vendor = pci->attr->pcidev.vendor_id;
  return base_class == 0x12 || (base_class == 0x03 && (vendor == kNvidia || vendor == kAmd));
}

// The PCI device an OS device hangs off, or null (a virtual device).
hwloc_obj_t pci_above(hwloc_obj_t object) {
  for (hwloc_obj_t o = object->parent; o; o = o->parent) {
    if (o->type == HWLOC_OBJ_PCI_DEVICE) return o;
  }
  return nullptr;
}

std::vector<NumaNode> numa_nodes_of(hwloc_topology_t t) {
  std::vector<NumaNode> nodes;
  const int count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode n;
    n.os_index = node->os_index;
    n.memory_bytes = node->attr ? node->attr->numanode.local_memory : 0;
    if (node->cpuset) {
      n.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, node->cpuset, HWLOC_OBJ_CORE);
      n.pus = hwloc_get_nbobjs_inside_cpuset_by_type(t, node->cpuset, HWLOC_OBJ_PU);
      n.cpus = as_list(node->cpuset);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// One entry per GPU's PCI device, named after the OS devices hwloc found on
// it (cuda0, nvml0, card0, ... depending on its plugins).
std::vector<Device> gpus_of(const Topology& topology) {
  std::vector<Device> gpus;
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topology.get(), pci));) {
    if (!is_gpu(pci)) continue;
    Device d;
    for (hwloc_obj_t os = pci->io_first_child; os; os = os->next_sibling) {
      if (os->type != HWLOC_OBJ_OS_DEVICE || !os->name) continue;
      d.name += (d.name.empty() ? "" : ",") + std::string(os->name);
    }
    d.busid = busid_of(pci);
    if (d.name.empty()) d.name = d.busid;
    d.model = model_of(pci);
    d.numa = as_list(topology.nodes_near(pci));
    gpus.push_back(std::move(d));
  }
  return gpus;
}

// Network interfaces and RDMA devices: the OS devices hwloc found on PCI
// devices. Virtual interfaces (veth, bridges, lo) have none.
std::vector<Device> nics_of(const Topology& topology) {
  std::vector<Device> nics;
  for (hwloc_obj_t os = nullptr; (os = hwloc_get_next_osdev(topology.get(), os));) {
    const auto type = os->attr->osdev.type;
    if ((type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) || !os->name) continue;
    Device d;
    d.name = os->name;
    if (hwloc_obj_t pci = pci_above(os)) {
      d.busid = busid_of(pci);
      d.model = model_of(pci);
    }
    d.numa = as_list(topology.nodes_near(os));
    nics.push_back(std::move(d));
  }
  return nics;
}

}  // namespace

Status describe_machine(Machine* out) {
  Topology topology;
  if (!topology.get()) return SystemError("hwloc could not load the machine's topology");
  hwloc_topology_t t = topology.get();
  Machine m;
  const char* version = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "hwlocVersion");
  m.hwloc_version = version ? version : "";
  m.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  m.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  m.numa_nodes = numa_nodes_of(t);
  m.gpus = gpus_of(topology);
  m.nics = nics_of(topology);
  *out = std::move(m);
  return Status::Ok();
}

#else

Status describe_machine(Machine*) {
  return SystemError("this ringreduce was built without hwloc (libhwloc-dev), so it cannot read the machine's layout");
}

#endif

}  // namespace rr::topo
