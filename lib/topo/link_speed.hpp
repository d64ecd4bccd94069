#pragma once
// The speed of this process's network links, as their drivers report it
// (ethtool's "Speed"), for sizing the ring's pipeline to a link's
// bandwidth-delay product.

#include <string>
#include <vector>

namespace rr::topo {

struct LinkSpeed {
  double gbps = 0;     // bits/s / 1e9; 0: no link says
  std::string device;  // the interface it came from
};

// The fastest interface that is up, not loopback, and reports a speed, in
// this process's network namespace. `only`, if not empty, limits it to those
// names, which may also be RDMA devices (UCX_NET_DEVICES' "mlx5_0:1", read as
// its name before ':'), whose ports' rate counts then.
LinkSpeed fastest_link(const std::vector<std::string>& only);

// UCX_NET_DEVICES as a list of names; empty when unset or "all".
std::vector<std::string> ucx_net_devices();

}  // namespace rr::topo
