// What UCX sees, as `ucx_info -d` shows it: every memory domain of every
// component, and the transports and devices each offers. Listed through UCT,
// the layer under UCP whose resource queries need no context or worker;
// UCX_TLS and UCX_NET_DEVICES then choose among these.

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <cstring>
#include <memory>
#include <string>

#include "sections.hpp"

extern char** environ;

namespace rr::info {

namespace {

// RAII owners of the UCT handles a query holds.
struct ComponentListFree {
  void operator()(uct_component_h* list) const { uct_release_component_list(list); }
};
struct MdConfigFree {
  void operator()(uct_md_config_t* config) const { uct_config_release(config); }
};
struct MdClose {
  void operator()(uct_md* md) const { uct_md_close(md); }
};
struct ResourceListFree {
  void operator()(uct_tl_resource_desc_t* list) const { uct_release_tl_resource_list(list); }
};
using ComponentList = std::unique_ptr<uct_component_h, ComponentListFree>;
using MdConfig = std::unique_ptr<uct_md_config_t, MdConfigFree>;
using Md = std::unique_ptr<uct_md, MdClose>;
using ResourceList = std::unique_ptr<uct_tl_resource_desc_t, ResourceListFree>;

// ucx_info's words for each kind of device.
const char* device_type_name(uct_device_type_t type) {
  switch (type) {
    case UCT_DEVICE_TYPE_NET: return "network";
    case UCT_DEVICE_TYPE_SHM: return "intra-node";
    case UCT_DEVICE_TYPE_ACC: return "accelerator";
    case UCT_DEVICE_TYPE_SELF: return "loopback";
    default: return "?";
  }
}

// What a network device is: the PCI device and NUMA node hwloc places it on
// ("mlx5_0:1" is port 1 of hwloc's "mlx5_0"), or why there is none.
void describe_network_device(const std::string& ucx_name, const std::vector<topo::Device>& nics, bool hwloc_read,
                             std::string* numa, std::string* detail) {
  const std::string name = ucx_name.substr(0, ucx_name.find(':'));
  for (const topo::Device& nic : nics) {
    if (nic.name != name) continue;
    *numa = nic.numa.empty() ? "-" : nic.numa;
    *detail = "PCI " + nic.busid + (nic.model.empty() ? "" : " " + nic.model);
    return;
  }
  if (name == "lo") {
    *detail = "loopback interface";
  } else if (hwloc_read) {
    *detail = "virtual interface (no PCI device under it)";
  }
}

// Lists one memory domain's transports into `table`; a note when it fails.
void list_md(uct_component_h component, const char* md_name, const std::vector<topo::Device>& nics, bool hwloc_read,
             Table* table, std::vector<std::string>* notes) {
  auto failed = [&](const char* call, ucs_status_t status) {
    notes->push_back(std::string("memory domain ") + md_name + ": " + call + ": " + ucs_status_string(status));
  };
  uct_md_config_t* raw_config = nullptr;
  ucs_status_t status = uct_md_config_read(component, nullptr, nullptr, &raw_config);
  if (status != UCS_OK) return failed("uct_md_config_read", status);
  MdConfig config(raw_config);
  uct_md_h raw_md = nullptr;
  status = uct_md_open(component, md_name, config.get(), &raw_md);
  if (status != UCS_OK) return failed("uct_md_open", status);
  Md md(raw_md);
  uct_tl_resource_desc_t* raw_resources = nullptr;
  unsigned count = 0;
  status = uct_md_query_tl_resources(md.get(), &raw_resources, &count);
  if (status != UCS_OK) return failed("uct_md_query_tl_resources", status);
  ResourceList resources(raw_resources);
  for (unsigned i = 0; i < count; ++i) {
    const uct_tl_resource_desc_t& r = resources.get()[i];
    std::string numa = "-", detail;
    if (r.dev_type == UCT_DEVICE_TYPE_NET) describe_network_device(r.dev_name, nics, hwloc_read, &numa, &detail);
    table->rows.push_back({md_name, r.tl_name, r.dev_name, device_type_name(r.dev_type), numa, detail});
  }
}

}  // namespace

Section ucx_section(const std::vector<topo::Device>& nics, bool hwloc_read) {
  Section s;
  s.title = "UCX";
  s.key = "ucx";
  s.facts.push_back({"version", ucp_get_version_string()});
  // UCX's own variables change what ringreduce gets from it.
  std::string ucx_variables;
  for (char** v = environ; *v; ++v) {
    if (std::strncmp(*v, "UCX_", 4) == 0) ucx_variables += (ucx_variables.empty() ? "" : " ") + std::string(*v);
  }
  s.facts.push_back({"UCX_* set", ucx_variables.empty() ? "none" : ucx_variables});

  Table table{"transports", {"memory domain", "transport", "device", "type", "NUMA", "what it is"}, {}};
  uct_component_h* raw_components = nullptr;
  unsigned component_count = 0;
  ucs_status_t status = uct_query_components(&raw_components, &component_count);
  if (status != UCS_OK) {
    s.notes.push_back(std::string("uct_query_components: ") + ucs_status_string(status));
    return s;
  }
  ComponentList components(raw_components);
  for (unsigned c = 0; c < component_count; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    status = uct_component_query(components.get()[c], &attr);
    if (status != UCS_OK) {
      s.notes.push_back(std::string("uct_component_query: ") + ucs_status_string(status));
      continue;
    }
    // The second query fills the array the first one sized.
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    status = uct_component_query(components.get()[c], &attr);
    if (status != UCS_OK) {
      s.notes.push_back(std::string("uct_component_query(") + attr.name + "): " + ucs_status_string(status));
      continue;
    }
    for (const uct_md_resource_desc_t& md : mds) {
      list_md(components.get()[c], md.md_name, nics, hwloc_read, &table, &s.notes);
    }
  }
  s.tables.push_back(std::move(table));
  return s;
}

}  // namespace rr::info
