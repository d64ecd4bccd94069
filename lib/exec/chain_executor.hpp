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
#include "algo/primitive.hpp"
#include "exec/call.hpp"
#include "exec/column_loop.hpp"
#include "exec/primitives.hpp"
#include "memory/staging_pool.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class ChainExecutor final : private ColumnLoop {
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

  // ColumnLoop.
  Status start(size_t slot, size_t chunk) override;
  bool active(size_t slot) const override { return columns_[slot].active; }
  Status advance(size_t slot, bool* moved, bool* finished) override;
  void needs(bool more_columns, bool* left, bool* right) const override;
  Status describe_stall(Code code, int failed_peer, const std::string& cause) const override;
  void drain() override;

  // Chunk `chunk`'s places in the call's buffers, `slot`'s staging slot
  // standing in for what arrives when this rank reduces it.
  ChunkPlaces places(size_t slot, size_t chunk) const;
  // Posts the send of what `at` leaves to forward.
  Status send_on(Column& column, const ChunkPlaces& at);
  // A post the transport refused, said as this call's error.
  Status refused(const Status& posted) const;

  transport::Transport* transport_;
  memory::StagingPool* pool_;
  int nranks_;
  int rank_;
  std::vector<Column> columns_;

  Call* call_ = nullptr;
  algo::Primitive primitive_ = algo::Primitive::kSend;  // what this rank does with every chunk
  int left_ = 0;   // the ranks before and after this one in the ring order
  int right_ = 0;
  size_t chunks_ = 0;
  size_t elem_bytes_ = 0;
};

}  // namespace rr::exec
