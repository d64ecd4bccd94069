#pragma once
// The book a rank keeps of a same-host board (transport/shm/board.hpp):
// which publication it makes next, whose it must see before it may write
// it, whether a peer's is there, and how to wait for one (a bounded poll,
// then a sleep on the peer's flag). It never blocks: the one-shot
// schedules (coll/one_shot.hpp) are the algorithm that uses it, and
// exec::drive their loop, with liveness, the deadline and the interrupt
// watched as for every other algorithm. What a publication holds and how it
// is reduced is theirs; this numbers the publications and keeps a rank from
// overwriting a buffer a peer may still read.
//
// Each rank publishes 0, 1, 2, ... in the same order, and makes n + 1 only
// once it has read all it needs of everyone's n, so a peer's publication
// n - 1 says it is done with n - 2, whose buffer n reuses. Before writing n
// a rank looks at the n - 1 of those that read its n - 2 (finish() says
// who: everyone, its ring neighbours, or nobody), unless it read every
// peer's n - 1 itself and so knows.

#include <cstdint>
#include <string>
#include <vector>

#include "transport/shm/board.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class BoardExecutor {
 public:
  BoardExecutor(transport::Transport* transport, transport::shm::Board* board, int rank);

  transport::Transport* transport() const { return transport_; }
  size_t capacity() const { return board_->capacity(); }
  int ranks() const { return board_->ranks(); }
  int rank() const { return rank_; }

  // The peer whose previous publication this rank must see before it
  // writes its next (it read what that buffer held last); -1: it may write.
  int claim_blocker();
  // Where this rank writes its next publication (Board::kHeaderRoom bytes
  // of header, then the data), once claim_blocker() said -1.
  uint8_t* buffer() { return board_->buffer(rank_, next_); }
  // Publishes what buffer() holds: `bytes` of data, or a header-only
  // announcement (Board::carries_data false).
  void publish(uint32_t bytes) { board_->publish(rank_, next_, bytes); }
  // `peer`'s publication of the same number as this rank's next, if it is
  // there: *buffer and *bytes as it published them (counted as read).
  bool read(int peer, const uint8_t** buffer, uint32_t* bytes) {
    if (!board_->published(peer, next_, bytes)) return false;
    *buffer = board_->buffer(peer, next_);
    bytes_read_[static_cast<size_t>(peer)] +=
        transport::shm::Board::kHeaderRoom + (transport::shm::Board::carries_data(*bytes) ? *bytes : 0);
    return true;
  }
  // Whether `peer`'s publication that a wait looks for is there
  // (`claiming`: its previous one, or any later; else its current one).
  bool there(int peer, bool claiming) {
    uint32_t bytes = 0;
    return claiming ? board_->published_at_least(peer, next_ - 1) : board_->published(peer, next_, &bytes);
  }
  // The first look at a wait for `peer` (`claiming`: its previous
  // publication, else its current one): a peer on a core of its own
  // publishes within a microsecond or two of this rank in a program in
  // step, so this polls its flag (a load from a line in this core's cache
  // until the peer writes it) that long before the caller goes on waiting
  // the policy's way, whose rounds soon yield the core (a system call
  // each). Ranks that share cores poll briefly (as long as the policy's
  // spin rounds of a plain loop last), then yield at once (Round::spun):
  // the peer may need this core. True once the publication is there.
  bool poll(int peer, bool claiming);
  // Who reads a publication of this rank: every peer (a one-shot call),
  // its two ring neighbours by rank number (an argument check), or nobody
  // (an announcement, read only by a peer that called something else).
  enum class Readers { kEveryone, kNeighbours, kNobody };
  // This rank read all it needs of the current publication of every rank
  // (`read_all`: it read every peer's), and `readers` read its own; the
  // next claim takes the next number.
  void finish(Readers readers, bool read_all) {
    readers_[next_ & 1] = readers;
    if (read_all) all_done_ = next_;  // every peer published next_, so is done with next_ - 1
    ++next_;
  }

  // A sleeping wait for `peer` (exec::Sleeper): on its flag, until it
  // publishes what poll() looks for, or at most `timeout_ms`.
  void sleep(int peer, bool claiming, int timeout_ms) {
    board_->sleep_until_published(peer, claiming ? next_ - 1 : next_, timeout_ms);
  }
  // What a stall waiting for `peer` says after "rank R": " waited for rank
  // 1's part of the call (same-host shared-memory board: rank 1 has
  // published 6 times, this rank 7)".
  std::string wait_note(int peer, bool claiming);

  // Bytes this rank's publications carried to `peer`, header included, as
  // the caller counts them (it knows who reads what: count_sent, or
  // count_sent_to_all for every peer); bytes read from `peer` (read()
  // counts its header and data). For rrCommGetPeerBytes.
  void count_sent(int peer, uint64_t bytes) { sent_to_[static_cast<size_t>(peer)] += bytes; }
  void count_sent_to_all(uint64_t bytes) { sent_to_all_ += bytes; }
  uint64_t bytes_sent(int peer) const;
  uint64_t bytes_read(int peer) const;

 private:
  static constexpr int kOwnCorePolls = 4096;
  static constexpr int kSharedCorePolls = 80;
  transport::Transport* transport_;
  transport::shm::Board* board_;
  int rank_;
  uint64_t next_ = 0;      // this rank's next publication
  uint64_t all_done_ = 0;  // every rank is done with every publication below this
  Readers readers_[2] = {Readers::kNobody, Readers::kNobody};  // of the last two, by parity
  uint64_t sent_to_all_ = 0;
  std::vector<uint64_t> sent_to_;
  std::vector<uint64_t> bytes_read_;
};

}  // namespace rr::exec
