#include "topo/link_speed.hpp"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace rr::topo {

namespace {

// The driver's speed in Mbit/s, 0 where it reports none (SPEED_UNKNOWN).
double speed_mbps(int fd, const char* name) {
  ifreq request{};
  std::strncpy(request.ifr_name, name, IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFFLAGS, &request) != 0) return 0;
  if ((request.ifr_flags & IFF_UP) == 0 || (request.ifr_flags & IFF_LOOPBACK) != 0) return 0;
  ethtool_cmd command{};
  command.cmd = ETHTOOL_GSET;
  request.ifr_data = reinterpret_cast<char*>(&command);
  if (ioctl(fd, SIOCETHTOOL, &request) != 0) return 0;
  const uint32_t speed = ethtool_cmd_speed(&command);
  return speed == 0 || speed == static_cast<uint32_t>(SPEED_UNKNOWN) ? 0 : speed;
}

// An RDMA device's fastest port, in Gbit/s, from /sys/class/infiniband/<name>/
// ports/<p>/rate ("100 Gb/sec (4X EDR)"); 0 if it has none.
double rdma_gbps(const std::string& name) {
  const std::string ports = "/sys/class/infiniband/" + name + "/ports";
  DIR* dir = opendir(ports.c_str());
  if (!dir) return 0;
  double best = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::FILE* file = std::fopen((ports + "/" + entry->d_name + "/rate").c_str(), "re");
    if (!file) continue;
    double gbps = 0;
    if (std::fscanf(file, "%lf", &gbps) == 1 && gbps > best) best = gbps;
    std::fclose(file);
  }
  closedir(dir);
  return best;
}

}  // namespace

std::vector<std::string> ucx_net_devices() {
  std::vector<std::string> names;
  const char* text = std::getenv("UCX_NET_DEVICES");
  if (!text || std::strcmp(text, "all") == 0) return names;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    item = item.substr(0, item.find(':'));
    if (!item.empty()) names.push_back(item);
  }
  return names;
}

LinkSpeed fastest_link(const std::vector<std::string>& only) {
  LinkSpeed best;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return best;
  if (struct if_nameindex* interfaces = ::if_nameindex()) {
    for (const struct if_nameindex* i = interfaces; i->if_index != 0 && i->if_name != nullptr; ++i) {
      if (!only.empty() && std::find(only.begin(), only.end(), i->if_name) == only.end()) continue;
      const double gbps = speed_mbps(fd, i->if_name) / 1000;
      if (gbps > best.gbps) best.gbps = gbps, best.device = i->if_name;
    }
    ::if_freenameindex(interfaces);
  }
  close(fd);
  // UCX_NET_DEVICES may name RDMA devices (mlx5_0:1), which are no network
  // interfaces: their ports say their rate.
  for (const std::string& name : only) {
    const double gbps = rdma_gbps(name);
    if (gbps > best.gbps) best.gbps = gbps, best.device = name;
  }
  return best;
}

}  // namespace rr::topo
