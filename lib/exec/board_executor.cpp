#include "exec/board_executor.hpp"

#include <string>
#include <vector>

namespace rr::exec {

using transport::shm::Board;

BoardExecutor::BoardExecutor(transport::Transport* transport, Board* board, int rank)
    : transport_(transport), board_(board), rank_(rank), bytes_read_(static_cast<size_t>(board->ranks()), 0) {}

uint64_t BoardExecutor::bytes_read(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < bytes_read_.size() ? bytes_read_[static_cast<size_t>(peer)] : 0;
}

void BoardExecutor::sleep(int timeout_ms) {
  if (sleep_for_finish_) {
    board_->sleep_until_finished(sleep_peer_, next_ - 2, timeout_ms);
  } else {
    board_->sleep_until_published(sleep_peer_, next_, timeout_ms);
  }
}

Status BoardExecutor::still(WaitPolicy& wait, const BoardCall& call, int peer, bool publishing) {
  // Notices from peers and posts handed over by other threads travel on the transport.
  const bool moved = wait.checks_due() && transport_->progress();
  sleep_peer_ = peer;
  sleep_for_finish_ = publishing;
  int failed_peer = -1;
  Status cause = wait.after_still_round(peer, -1, moved, &failed_peer);
  if (cause.ok()) return cause;
  const std::string text =
      *call.name + (cause.code() == Code::kTimeout ? " timed out" : " failed") + ": rank " + std::to_string(rank_) +
      (publishing ? " waited for rank " + std::to_string(peer) + " to finish reading the call before last"
                  : " waited for rank " + std::to_string(peer) + "'s part of the call (it has published " +
                        std::to_string(board_->publications(peer)) + " times, this rank " +
                        std::to_string(next_ + 1) + ")") +
      " (same-host shared-memory board)";
  if (cause.code() == Code::kTimeout) return Status(Code::kTimeout, text);
  return Status(cause.code(), text + ": " + cause.message());
}

Status BoardExecutor::claim(const BoardCall& call, uint8_t** buffer) {
  // Buffer next_ % 2 last held publication next_ - 2: every rank must be done with it.
  if (next_ >= 2 && all_finished_ + 2 <= next_) {
    WaitPolicy wait(transport_, call.deadline, call.interrupt, this);
    for (int peer = 0; peer < board_->ranks(); ++peer) {
      if (peer == rank_) continue;
      while (!board_->finished(peer, next_ - 2)) RR_RETURN_IF_ERROR(still(wait, call, peer, true));
      wait.reset();
    }
    all_finished_ = next_ - 1;
  }
  *buffer = board_->buffer(rank_, next_);
  return Status::Ok();
}

void BoardExecutor::publish(uint32_t bytes) {
  board_->publish(rank_, next_, bytes);
  if (bytes != Board::kNoData) bytes_published_ += bytes;
}

Status BoardExecutor::await(const BoardCall& call, int peer, const uint8_t** buffer, uint32_t* bytes) {
  if (!board_->published(peer, next_, bytes)) {
    WaitPolicy wait(transport_, call.deadline, call.interrupt, this);
    do {
      RR_RETURN_IF_ERROR(still(wait, call, peer, false));
    } while (!board_->published(peer, next_, bytes));
  }
  *buffer = board_->buffer(peer, next_);
  if (*bytes != Board::kNoData) bytes_read_[static_cast<size_t>(peer)] += *bytes;
  return Status::Ok();
}

void BoardExecutor::finish(bool read_all) {
  board_->finish(rank_, next_);
  // Every peer published next_, so each finished next_ - 1 before.
  if (read_all && next_ >= 1) all_finished_ = next_;
  ++next_;
}

}  // namespace rr::exec
