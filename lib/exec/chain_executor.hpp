#pragma once
// Runs broadcast and reduce as a pipelined chain (algo/chain.hpp says who is
// where): each rank forwards chunk c as soon as it has it, so for a large
// message every link carries the whole buffer once and all links work at
// the same time (busbw = algbw, the optimum for both). Broadcast receives
// straight into every rank's output; reduce adds each rank's input into a
// staging slot on its way and ends in the root's output.

#include <chrono>
#include <vector>

#include "common/status.hpp"
#include "exec/call.hpp"
#include "memory/staging_pool.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class ChainExecutor {
 public:
  // `pool` must hold at least 2 x depth slots of chunk_bytes.
  ChainExecutor(transport::Transport* transport, memory::StagingPool* pool, int depth, int nranks, int rank);

  // Runs call (its collective kBroadcast or kReduce; call.order the ring
  // order the chain runs along) in chunks of chunk_elems.
  Status run(Call& call, size_t chunk_elems);

 private:
  struct Column {
    size_t chunk = 0;
    bool active = false;
    bool received = false;  // the receive completed and was consumed
    transport::Completion recv;
    transport::Completion send;
  };

  Status start(Column& column, size_t slot, size_t chunk);
  Status advance(Column& column, size_t slot, bool* finished);
  Status stall(Code code, const std::string& detail) const;
  // A post the transport refused, said as this call's error.
  Status refused(const Status& posted) const;
  void drain();

  transport::Transport* transport_;
  memory::StagingPool* pool_;
  int nranks_;
  int rank_;
  std::vector<Column> columns_;

  const Call* call_ = nullptr;
  bool reduces_ = false;  // reduce, not broadcast
  int position_ = 0;  // in the chain: 0 is its head
  int left_ = 0;      // the ranks before and after this one in the ring order
  int right_ = 0;
  size_t chunks_ = 0;
  size_t elem_bytes_ = 0;
  size_t chunks_done_ = 0;
};

}  // namespace rr::exec
