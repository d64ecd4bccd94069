// The machine as hwloc reads it (topo/machine.hpp): NUMA nodes, cores, and
// the GPUs and network devices with the NUMA node each is nearest to.

#include <string>

#include "sections.hpp"
#include "topo/numa.hpp"

namespace rr::info {

namespace {

std::string mib(uint64_t bytes) { return bytes ? std::to_string(bytes >> 20) + " MiB" : "?"; }

Table device_table(const std::string& name, const std::vector<topo::Device>& devices) {
  Table table{name, {"device", "NUMA", "PCI", "model"}, {}};
  for (const topo::Device& d : devices) {
    table.rows.push_back({d.name, d.numa.empty() ? "-" : d.numa, d.busid.empty() ? "-" : d.busid,
                          d.model.empty() ? "-" : d.model});
  }
  return table;
}

}  // namespace

Section topology_section(const Status& read, const topo::Machine& machine) {
  Section s;
  s.title = "Topology";
  s.key = "topology";
  if (!read.ok()) {
    s.notes.push_back(read.message());
    return s;
  }
  s.facts = {
      {"hwloc", machine.hwloc_version.empty() ? "?" : machine.hwloc_version},
      {"NUMA nodes", std::to_string(machine.numa_nodes.size())},
      {"cores", std::to_string(machine.cores)},
      {"hardware threads", std::to_string(machine.pus)},
  };
  // What a rank started like this one reports for the ring's order (the node its binding covers).
  std::string why;
  const int node = topo::numa_node_of_this_process(&why);
  s.facts.push_back({"this process's NUMA node", node >= 0 ? std::to_string(node) : "unknown (" + why + ")"});
  Table nodes{"memory and CPUs by NUMA node", {"node", "memory", "cores", "threads", "CPUs"}, {}};
  for (const topo::NumaNode& n : machine.numa_nodes) {
    nodes.rows.push_back({std::to_string(n.os_index), mib(n.memory_bytes), std::to_string(n.cores),
                          std::to_string(n.pus), n.cpus});
  }
  s.tables.push_back(std::move(nodes));
  s.tables.push_back(device_table("GPUs", machine.gpus));
  s.tables.push_back(device_table("network devices", machine.nics));
  return s;
}

}  // namespace rr::info
