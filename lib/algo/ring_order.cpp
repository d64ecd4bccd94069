#include "algo/ring_order.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace rr::algo {

std::vector<int> topology_ring_order(const std::vector<int>& host_of_rank, const std::vector<int>& numa_of_rank) {
  const int n = static_cast<int>(host_of_rank.size());
  // Each host's place: the order of its lowest rank.
  std::map<int, int> host_place;
  for (int r = 0; r < n; ++r) host_place.emplace(host_of_rank[static_cast<size_t>(r)], static_cast<int>(host_place.size()));
  auto numa = [&](int r) {
    return r < static_cast<int>(numa_of_rank.size()) ? numa_of_rank[static_cast<size_t>(r)] : -1;
  };
  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_tuple(host_place[host_of_rank[static_cast<size_t>(a)]], numa(a), a) <
           std::make_tuple(host_place[host_of_rank[static_cast<size_t>(b)]], numa(b), b);
  });
  return order;
}

int host_crossings(const std::vector<int>& order, const std::vector<int>& host_of_rank) {
  const size_t n = order.size();
  int crossings = 0;
  for (size_t p = 0; p < n; ++p) {
    const int here = host_of_rank[static_cast<size_t>(order[p])];
    const int next = host_of_rank[static_cast<size_t>(order[(p + 1) % n])];
    crossings += here != next ? 1 : 0;
  }
  return crossings;
}

std::vector<int> ring_positions(const std::vector<int>& order) {
  std::vector<int> position(order.size());
  for (size_t p = 0; p < order.size(); ++p) position[static_cast<size_t>(order[p])] = static_cast<int>(p);
  return position;
}

}  // namespace rr::algo
