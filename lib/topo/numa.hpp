#pragma once
// The machine's NUMA layout as hwloc reads it: which memory node a PCI
// device (a GPU, a NIC) hangs off, so the memory it copies from and to can
// be placed there. Without hwloc in the build every answer is "unknown".

#include <string>

namespace rr::topo {

// The OS index of the NUMA node nearest the PCI device `busid`
// ("0000:3b:00.0", as cudaDeviceGetPCIBusId and lspci -D write it), or -1
// with *why saying why not (no hwloc, no such device, a malformed id, or a
// device whose locality spans several nodes).
int numa_node_of_pci(const std::string& busid, std::string* why);

// The OS index of the NUMA node this process runs on: the one node its CPU
// binding covers, or -1 with *why saying why not (no hwloc, or a binding
// over several nodes, as an unbound process has on a multi-node machine).
// Loads the topology once per process.
int numa_node_of_this_process(std::string* why);

}  // namespace rr::topo
