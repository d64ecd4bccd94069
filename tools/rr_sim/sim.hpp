#pragma once
// rr-sim's core: the engine's own allreduce schedules (algo/ring.hpp,
// algo/recursive_doubling.hpp, the ring order of algo/ring_order.hpp) run
// over a simulated network in virtual time, without data.
//
// The network: H hosts of K ranks each (block or cyclic placement). Each
// host has one NIC, full duplex at `link_Bps` each way, behind a switch that
// never blocks. A message between hosts holds the sender's NIC egress and the
// receiver's NIC ingress for bytes / link_Bps (first come, first served, in
// the order the sends become ready), then arrives `alpha_s` later. A message
// within a host is a copy through shared memory: it holds the sending rank
// for bytes / local_Bps and arrives local_alpha_s later. A reduce step costs
// bytes / reduce_Bps on the receiving rank (0: free).
//
// The executors' behaviour is modelled as they run: the ring pipelines
// chunk columns with at most `pipeline_depth` in flight per rank, a column's
// step s + 1 leaving once its step s arrived (and was reduced); recursive
// doubling exchanges slot-sized pieces one after another, each message
// carrying the 32-byte operation header, each round ending when the
// partner's message arrived and was reduced. The ring first swaps the
// 32-byte argument check with both neighbours (check_arguments).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rrsim {

struct Machine {
  int ranks = 2;
  int ranks_per_host = 1;
  bool cyclic = false;             // rank i on host i mod H; else blocks of K
  double alpha_s = 5e-6;           // per message between hosts
  double link_Bps = 12.5e9;        // each host's NIC, each direction, bytes/s
  double local_alpha_s = 0.5e-6;   // per message within a host
  double local_Bps = 8e9;          // a copy within a host, bytes/s
  double reduce_Bps = 0;           // reducing, bytes/s; 0: free

  int hosts() const { return (ranks + ranks_per_host - 1) / ranks_per_host; }
  int host_of(int rank) const { return cyclic ? rank % hosts() : rank / ranks_per_host; }
};

struct Engine {
  size_t chunk_bytes = size_t{512} << 10;  // RR_CHUNK_BYTES
  int pipeline_depth = 4;                  // RR_PIPELINE_DEPTH
  bool topology_order = true;              // RR_RING_ORDER=topology
  bool check_arguments = true;             // the ring's header exchange
  size_t board_bytes = size_t{32} << 10;   // RR_SHM_BOARD_BYTES: one-shot's publication
};

struct Result {
  double seconds = 0;            // until the last rank finished
  uint64_t messages = 0;
  uint64_t bytes_between_hosts = 0;
};

// An allreduce of `bytes` (elements of `elem` bytes) from time 0 on every rank.
Result simulate_ring(const Machine& m, const Engine& e, size_t bytes, size_t elem = 4);
Result simulate_recursive_doubling(const Machine& m, const Engine& e, size_t bytes, size_t elem = 4);
// Recursive halving then doubling (algo/halving_doubling.hpp): the argument
// check's neighbour exchange first, the reduce-scatter's halves in
// slot-sized pieces (each reduced before the next moves), the all-gather's
// in one message each.
Result simulate_halving_doubling(const Machine& m, const Engine& e, size_t bytes, size_t elem = 4);

// One-shot on the same-host board (comm/one_shot.cpp; every rank on one
// host): in board-sized pieces, each rank copies its piece into its cell
// (a shared-memory copy, seen local_alpha later), then reduces all N
// pieces in rank order as they appear; its next piece goes once it has
// read this one (the board's two buffers never wait longer than that).
Result simulate_one_shot(const Machine& m, const Engine& e, size_t bytes, size_t elem = 4);

// The ring's order of the ranks under `e` (algo/ring_order.hpp on m's hosts).
std::vector<int> ring_order(const Machine& m, const Engine& e);

}  // namespace rrsim
