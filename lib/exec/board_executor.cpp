#include "exec/board_executor.hpp"

#include "exec/wait_policy.hpp"

namespace rr::exec {

using transport::shm::Board;

BoardExecutor::BoardExecutor(transport::Transport* transport, Board* board, int rank)
    : transport_(transport),
      board_(board),
      rank_(rank),
      sent_to_(static_cast<size_t>(board->ranks()), 0),
      bytes_read_(static_cast<size_t>(board->ranks()), 0) {}

uint64_t BoardExecutor::bytes_sent(int peer) const {
  if (peer < 0 || static_cast<size_t>(peer) >= sent_to_.size() || peer == rank_) return 0;
  return sent_to_all_ + sent_to_[static_cast<size_t>(peer)];
}

uint64_t BoardExecutor::bytes_read(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < bytes_read_.size() ? bytes_read_[static_cast<size_t>(peer)] : 0;
}

int BoardExecutor::claim_blocker() {
  // Buffer next_ % 2 last held publication next_ - 2: every peer that read
  // it must be done with it, as its publication next_ - 1 says. A peer that
  // does not read this rank's publications may be further ahead (and have
  // written over next_ - 1): any publication from next_ - 1 on will do.
  const Readers readers = readers_[next_ & 1];
  if (next_ < 2 || all_done_ + 2 > next_ || readers == Readers::kNobody) return -1;
  auto behind = [&](int peer) { return peer != rank_ && !board_->published_at_least(peer, next_ - 1); };
  const int n = board_->ranks();
  if (readers == Readers::kNeighbours) {
    if (const int left = (rank_ + n - 1) % n; behind(left)) return left;
    if (const int right = (rank_ + 1) % n; behind(right)) return right;
    return -1;
  }
  for (int peer = 0; peer < n; ++peer) {
    if (behind(peer)) return peer;
  }
  all_done_ = next_ - 1;
  return -1;
}

bool BoardExecutor::poll(int peer, bool claiming) {
  const int polls = effective_wait_mode() == WaitMode::kYield ? kSharedCorePolls : kOwnCorePolls;
  for (int i = 0; i < polls; ++i) {
    if (there(peer, claiming)) return true;
  }
  return false;
}

std::string BoardExecutor::wait_note(int peer, bool claiming) {
  const std::string p = std::to_string(peer);
  return (claiming ? " waited for rank " + p + " to finish the call before" : " waited for rank " + p + "'s part of the call") +
         " (same-host shared-memory board: rank " + p + " has published " + std::to_string(board_->publications(peer)) +
         " times, this rank " + std::to_string(next_ + (claiming ? 0 : 1)) + ")";
}

}  // namespace rr::exec
