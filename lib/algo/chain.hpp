#pragma once
// Broadcast and reduce as a pipelined chain along the ring order (the
// executor is exec/chain_executor.hpp): chunks flow from chain position 0
// to position N-1, each rank forwarding a chunk as soon as it has it.
//
//   broadcast: the root heads the chain; every other rank receives.
//   reduce:    the rank after the root (in ring order) heads it with its
//              input, each later rank adds its own, the root ends it.
//
// Positions are along the ring's order (algo/ring_order.hpp), so the chain
// crosses each host's link once, as the ring does.

#include "algo/ring.hpp"

namespace rr::algo {

class ChainSchedule {
 public:
  // `order` (nranks entries, or null: rank order) as RingSchedule's.
  ChainSchedule(int nranks, int rank, int root, bool reduces, const int* order = nullptr)
      : nranks_(nranks), reduces_(reduces) {
    const int me = ring_position(order, nranks, rank);
    left_ = rank_at_position(order, nranks, me - 1);
    right_ = rank_at_position(order, nranks, me + 1);
    const int root_position = ring_position(order, nranks, root);
    const int head = reduces ? root_position + 1 : root_position;
    position_ = ((me - head) % nranks + nranks) % nranks;
  }

  int nranks() const { return nranks_; }
  // 0 heads the chain (it receives nothing); nranks - 1 ends it (it sends nothing).
  int position() const { return position_; }
  bool heads() const { return position_ == 0; }
  bool ends() const { return position_ == nranks_ - 1; }
  // The ranks before and after this one in the ring order: it receives from
  // the left and sends to the right.
  int left() const { return left_; }
  int right() const { return right_; }
  // What this rank does with every chunk: the head sends its input (the
  // broadcast's root keeps it in its output too), the middle reduces in its
  // own and sends on (reduce) or keeps and sends on (broadcast), the end
  // makes the final result (reduce's root) or keeps the chunk.
  Primitive primitive() const {
    if (heads()) return reduces_ ? Primitive::kSend : Primitive::kCopySend;
    if (ends()) return reduces_ ? Primitive::kRecvReduceCopy : Primitive::kRecv;
    return reduces_ ? Primitive::kRecvReduceSend : Primitive::kRecvCopySend;
  }

 private:
  int nranks_;
  bool reduces_;
  int position_ = 0;
  int left_ = 0;
  int right_ = 0;
};

}  // namespace rr::algo
