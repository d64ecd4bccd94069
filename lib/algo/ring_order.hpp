#pragma once
// The order in which the ring (and the chain) visit the ranks, as pure
// arithmetic. A launcher may number ranks in any order across hosts (Slurm's
// cyclic distribution puts rank i on host i mod H); a ring in rank order then
// leaves and re-enters every host once per rank, sharing each host's link
// between several flows. The topology order visits each host's ranks one
// after another, so the ring crosses each host's link once in each direction:
//
//   hosts in the order of their lowest rank; within a host, ranks by NUMA
//   node, then by rank.
//
// Block placements (ranks of a host numbered consecutively) keep rank order.
// User ranks, results and the C API do not change; only neighbours do.

#include <vector>

namespace rr::algo {

// order[position] = the rank at that position of the ring. `host_of_rank`
// names each rank's host (any int; equal ints mean one host), `numa_of_rank`
// its NUMA node (empty, or -1 where unknown: ranks of a host then keep rank
// order). Both are indexed by rank and the same on every rank.
std::vector<int> topology_ring_order(const std::vector<int>& host_of_rank, const std::vector<int>& numa_of_rank = {});

// How many times a ring in `order` passes from one host to another (the
// step from the last position back to the first included); 0 on one host.
int host_crossings(const std::vector<int>& order, const std::vector<int>& host_of_rank);

// position[rank] for `order`.
std::vector<int> ring_positions(const std::vector<int>& order);

}  // namespace rr::algo
