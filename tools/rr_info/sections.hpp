#pragma once
// rr-info's sections, one file each: what was built, what UCX sees, what the
// machine is made of, and every RR_* setting with where its value came from.

#include <vector>

#include "common/status.hpp"
#include "report.hpp"
#include "ringreduce/ringreduce.h"
#include "topo/machine.hpp"

namespace rr::info {

Section build_section();
// `nics` places UCX's network devices (from topology_section's machine);
// `hwloc_read` says whether that list is hwloc's word or merely empty.
Section ucx_section(const std::vector<topo::Device>& nics, bool hwloc_read);
// `read` is describe_machine's status; `machine` is valid when it is ok.
Section topology_section(const Status& read, const topo::Machine& machine);
// `config` as a communicator would be given it (rr-info's --config flags).
// *ok is false when the settings do not resolve (a bad RR_* value): a
// communicator would refuse them, and the section says why.
Section settings_section(const rrConfig_t& config, bool* ok);

}  // namespace rr::info
