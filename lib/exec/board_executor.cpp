#include "exec/board_executor.hpp"

#include <string>
#include <vector>

#include "common/log.hpp"

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

void BoardExecutor::sleep(int timeout_ms) { board_->sleep_until_published(sleep_peer_, sleep_for_, timeout_ms); }

Status BoardExecutor::wait_for(Call& call, int peer, uint64_t n, bool claiming) {
  // A peer on a core of its own publishes within a microsecond or two of
  // this rank in a program in step: poll its flag (a load from a line in
  // this core's cache until the peer writes it) that long before waiting
  // the policy's way, whose rounds soon yield the core (a system call each).
  // Ranks that share cores poll briefly: the peer may need this core.
  // Claiming, any publication from n on will do: a peer that does not read
  // this rank's publications may be further ahead (and have written over n).
  uint32_t bytes = 0;
  auto there = [&] { return claiming ? board_->published_at_least(peer, n) : board_->published(peer, n, &bytes); };
  const int polls = effective_wait_mode() == WaitMode::kYield ? kSharedCorePolls : kOwnCorePolls;
  for (int i = 0; i < polls; ++i) {
    if (there()) return Status::Ok();
  }
  WaitPolicy wait(transport_, call.until(), call.interrupt, this);
  sleep_peer_ = peer;
  sleep_for_ = n;
  while (!there()) {
    if (wait.dump_requested()) {
      RR_LOG(LogLevel::kWarn, "dump: %s: rank %d waited for rank %d's %s on the same-host shared-memory board in progress",
             call.label().c_str(), rank_, peer, claiming ? "previous publication" : "part of the call");
    }
    // Notices from peers and posts handed over by other threads travel on the transport.
    const bool moved = wait.checks_due() && transport_->progress();
    int failed_peer = -1;
    Status cause = wait.after_still_round(peer, -1, moved, &failed_peer);
    if (cause.ok()) continue;
    // What ended the wait may have come after the board was last read: most
    // often a peer's notice about a later call, which that peer reached only
    // after reading this rank's awaited part of this one, so the part is
    // there by now. A call whose parts are all published completes; the
    // notice, kept, fails the next call.
    if (there()) return Status::Ok();
    const std::string text =
        call.label() + (cause.code() == Code::kTimeout ? " timed out" : " failed") + ": rank " + std::to_string(rank_) +
        (claiming ? " waited for rank " + std::to_string(peer) + " to finish the call before"
                  : " waited for rank " + std::to_string(peer) + "'s part of the call") +
        " (same-host shared-memory board: rank " + std::to_string(peer) + " has published " +
        std::to_string(board_->publications(peer)) + " times, this rank " + std::to_string(next_ + (claiming ? 0 : 1)) +
        ")";
    if (cause.code() == Code::kTimeout) return Status(Code::kTimeout, text);
    return Status(cause.code(), text + ": " + cause.message());
  }
  return Status::Ok();
}

Status BoardExecutor::claim(Call& call, uint8_t** buffer) {
  // Buffer next_ % 2 last held publication next_ - 2: every peer that read
  // it must be done with it, as its publication next_ - 1 says.
  const Readers readers = readers_[next_ & 1];
  if (next_ >= 2 && all_done_ + 2 <= next_ && readers != Readers::kNobody) {
    const int n = board_->ranks();
    auto done = [&](int peer) -> Status {
      if (peer == rank_ || board_->published_at_least(peer, next_ - 1)) return Status::Ok();
      return wait_for(call, peer, next_ - 1, true);
    };
    if (readers == Readers::kNeighbours) {
      RR_RETURN_IF_ERROR(done((rank_ + n - 1) % n));
      RR_RETURN_IF_ERROR(done((rank_ + 1) % n));
    } else {
      for (int peer = 0; peer < n; ++peer) RR_RETURN_IF_ERROR(done(peer));
      all_done_ = next_ - 1;
    }
  }
  *buffer = board_->buffer(rank_, next_);
  return Status::Ok();
}

void BoardExecutor::publish(uint32_t bytes) { board_->publish(rank_, next_, bytes); }

Status BoardExecutor::await(Call& call, int peer, const uint8_t** buffer, uint32_t* bytes) {
  if (!board_->published(peer, next_, bytes)) {
    RR_RETURN_IF_ERROR(wait_for(call, peer, next_, false));
    board_->published(peer, next_, bytes);
  }
  *buffer = board_->buffer(peer, next_);
  bytes_read_[static_cast<size_t>(peer)] += Board::kHeaderRoom + (Board::carries_data(*bytes) ? *bytes : 0);
  return Status::Ok();
}

}  // namespace rr::exec
