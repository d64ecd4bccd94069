// Which schedule each collective takes, by rank count and size, and the
// order the ring visits the ranks in: one place for the choices the
// collectives make and rrCommGetAlgorithm / rrCommGetRingOrder report.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "algo/ring_order.hpp"
#include "algo/schedule.hpp"
#include "algo/select.hpp"
#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "reduce/reduce.hpp"

namespace rr {

algo::AllreduceAlgo Communicator::allreduce_algo(size_t bytes, bool has_reducer) {
  // The staged (device) path reduces through its own reducer, chunk by
  // chunk on the ring.
  if (has_reducer) return algo::AllreduceAlgo::kRing;
  // The call's own (rrCollConfig_t): the model decides among what it forces,
  // as for RR_ALGO, and the communicator's cached choice stays as it was.
  if (call_.forces_algorithm) {
    return algo::choose_allreduce(call_.allreduce_algo, settings_.model, size_, bytes, host_shape_);
  }
  // A loop of one size asks once (the model was a twentieth of an 8-byte call).
  if (bytes == chosen_bytes_) return chosen_algo_;
  const algo::AllreduceAlgo chosen =
      algo::choose_allreduce(settings_.allreduce_algo, settings_.model, size_, bytes, host_shape_);
  chosen_bytes_ = bytes;
  chosen_algo_ = chosen;
  if (chosen != last_algo_ || bytes > last_algo_bytes_ * 2 || bytes * 2 < last_algo_bytes_) {
    RR_LOG(LogLevel::kInfo,
           "rank %d: allreduce of %zu bytes on %d ranks (%d hosts, up to %d per host): %s (model: ring %.1f us, "
           "rd %.1f us, hd %.1f us, one-shot %.1f us%s; RR_ALGO=%s)",
           rank_, bytes, size_, host_shape_.hosts, host_shape_.ranks_per_host,
           algo::schedule_name(algo::allreduce_schedule(chosen, false)),
           algo::ring_seconds(settings_.model, size_, bytes, host_shape_) * 1e6,
           algo::recursive_doubling_seconds(settings_.model, size_, bytes, host_shape_) * 1e6,
           algo::halving_doubling_seconds(settings_.model, size_, bytes, host_shape_) * 1e6,
           algo::one_shot_seconds(settings_.model, size_, bytes, host_shape_) * 1e6,
           host_shape_.board_bytes == 0 ? ", no board" : bytes > host_shape_.board_bytes ? ", above the board" : "",
           algo::algo_name(settings_.allreduce_algo));
    last_algo_ = chosen;
    last_algo_bytes_ = bytes;
  }
  return chosen;
}

bool Communicator::broadcast_by_tree(size_t bytes) const { return size_ > 2 && bytes <= tree_bytes(); }

bool Communicator::reduce_by_tree(size_t bytes) const {
  // Each child's partial result needs a staging slot of its own, beside the
  // accumulator. The root has the most children, ceil(log2 N): decide by that
  // bound, so that every rank takes the same path.
  size_t most_children = 0;
  while ((size_t{1} << most_children) < static_cast<size_t>(size_)) ++most_children;
  return size_ > 2 && bytes <= tree_bytes() && most_children + 1 <= pool_.slots();
}

algo::Schedule Communicator::algorithm(exec::Collective collective, size_t count, rrDataType_t dtype) const {
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (size_ == 1) return algo::Schedule::kLocalCopy;
  switch (collective) {
    case exec::Collective::kAllReduce:
      return algo::allreduce_schedule(
          algo::choose_allreduce(settings_.allreduce_algo, settings_.model, size_, bytes, host_shape_),
          uses_same_host_path());
    case exec::Collective::kReduceScatter:
    case exec::Collective::kAllGather:
      return uses_same_host_path() ? algo::Schedule::kSameHostRing : algo::Schedule::kRing;
    case exec::Collective::kBroadcast:
      return broadcast_by_tree(bytes) ? algo::Schedule::kBinomialTree : algo::Schedule::kChain;
    case exec::Collective::kReduce:
      return reduce_by_tree(bytes) ? algo::Schedule::kBinomialTree : algo::Schedule::kChain;
    case exec::Collective::kGather:
    case exec::Collective::kScatter:
    case exec::Collective::kAllToAll:
    case exec::Collective::kAllToAllv:
      return algo::Schedule::kDirect;
    case exec::Collective::kBarrier:
      return has_board() && settings_.allreduce_algo != algo::AllreduceAlgo::kRecursiveDoubling
                 ? algo::Schedule::kOneShot
                 : algo::Schedule::kRecursiveDoubling;
  }
  return algo::Schedule::kNone;
}

void Communicator::choose_ring_order() {
  ring_order_.clear();
  const std::vector<int> hosts = transport_->host_of_ranks();
  if (hosts.size() != static_cast<size_t>(size_)) {
    RR_LOG(LogLevel::kInfo, "rank %d: ring order: rank order (the transport does not say where ranks run)", rank_);
    return;
  }
  const int host_count = *std::max_element(hosts.begin(), hosts.end()) + 1;
  // The selector's picture of the hosts (algo/select.hpp): how many, and the most ranks on one.
  std::vector<int> on_host(static_cast<size_t>(host_count), 0);
  for (int h : hosts) ++on_host[static_cast<size_t>(h)];
  host_shape_.hosts = host_count;
  host_shape_.ranks_per_host = *std::max_element(on_host.begin(), on_host.end());
  std::vector<int> order(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) order[static_cast<size_t>(r)] = r;
  // NUMA nodes as each rank reported it (-1 unknown), when the transport tells.
  std::vector<int> numa = transport_->numa_of_ranks();
  if (numa.size() != hosts.size()) numa.clear();
  if (settings_.ring_order_by_topology) order = algo::topology_ring_order(hosts, numa);
  bool is_rank_order = true;
  for (int p = 0; p < size_; ++p) is_rank_order &= order[static_cast<size_t>(p)] == p;
  if (!is_rank_order) ring_order_ = order;  // empty: rank order, the schedules' own arithmetic
  if (rank_ == 0 && log_level() >= LogLevel::kInfo) {
    std::string text;
    for (int p = 0; p < size_ && p < 64; ++p) text += (p ? " " : "") + std::to_string(order[static_cast<size_t>(p)]);
    if (size_ > 64) text += " ...";
    std::string nodes;
    for (int p = 0; p < size_ && p < 64 && !numa.empty(); ++p) {
      nodes += (p ? " " : "") + std::to_string(numa[static_cast<size_t>(order[static_cast<size_t>(p)])]);
    }
    RR_LOG(LogLevel::kInfo, "rank 0: ring order by %s (RR_RING_ORDER, %s): %d hosts, %d host crossings: %s "
           "(NUMA nodes along it: %s)",
           settings_.ring_order_by_topology ? "topology" : "rank", settings_.ring_order_source.text().c_str(), host_count,
           algo::host_crossings(order, hosts), text.c_str(), nodes.empty() ? "unknown" : nodes.c_str());
  }
}

std::vector<int> Communicator::ring_order() const {
  if (!ring_order_.empty()) return ring_order_;
  std::vector<int> order(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) order[static_cast<size_t>(r)] = r;
  return order;
}

}  // namespace rr
