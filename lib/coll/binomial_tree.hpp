#pragma once
// Broadcast and reduce on a binomial tree (algo/tree.hpp) as an algorithm
// object (exec/algorithm.hpp): the small calls, log2 N hops instead of the
// chain's N - 1. One chunk: a partial result always fits a staging slot.
// The argument check has already run (the communicator's agree()).
//
// Broadcast: receive from the parent, then feed the children. Reduce: gather
// the children's partial results into slots 1.., add them to this rank's
// input in a fixed order, pass the sum to the parent.

#include <cstddef>
#include <string>
#include <vector>

#include "coll/batch_steps.hpp"
#include "exec/call.hpp"
#include "memory/staging_pool.hpp"

namespace rr::coll {

class BinomialTree final : public BatchSteps {
 public:
  BinomialTree(transport::Transport* transport, memory::StagingPool* pool, int rank, int size);

  // The broadcast or reduce (call.collective) to run next, before
  // exec::drive() runs it.
  void prepare(const exec::Call& call);

  Status post(const std::string& what) override;
  Status progress(const std::string& what, exec::Round* round) override;

 private:
  std::string step_note() const override;

  bool reducing() const { return call_.collective == exec::Collective::kReduce; }

  memory::StagingPool* pool_;
  const int rank_;
  const int size_;

  exec::Call call_;
  size_t bytes_ = 0;
  int parent_ = -1;
  std::vector<int> children_;
  void* acc_ = nullptr;  // a reduce's running sum: the output at the root, else slot 0
  // 0: from the parent (broadcast) or the children (reduce); 1: to the
  // children (broadcast) or the parent (reduce); 2: done.
  int stage_ = 0;
};

}  // namespace rr::coll
