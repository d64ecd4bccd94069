#pragma once
// Runs publications on a same-host board (transport/shm/board.hpp): the
// waits of the one-shot schedules (comm/one_shot.cpp), with liveness, the
// deadline and the interrupt watched as the other executors do
// (exec/wait_policy.hpp). What a publication holds and how it is reduced is
// the caller's business; this numbers the publications, keeps a rank from
// overwriting a buffer a peer may still read, and waits.
//
// Each rank publishes 0, 1, 2, ... in the same order, and makes n + 1 only
// once it has read all it needs of everyone's n, so a peer's publication
// n - 1 says it is done with n - 2, whose buffer n reuses. Before writing n
// a rank looks at the n - 1 of those that read its n - 2 (finish() says
// who: everyone, its ring neighbours, or nobody), unless it read every
// peer's n - 1 itself and so knows.
//
// Nothing on a call's way that finds its peers' parts already there reads
// the clock or formats a string: the deadline starts at the call's first
// wait (microseconds after the call starts, for a program in step), and the
// call's name is made for an error only.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "exec/call.hpp"
#include "exec/wait_policy.hpp"
#include "transport/shm/board.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

class BoardExecutor final : private Sleeper {
 public:
  BoardExecutor(transport::Transport* transport, transport::shm::Board* board, int rank);

  size_t capacity() const { return board_->capacity(); }
  int ranks() const { return board_->ranks(); }

  // Waits until this rank may write its next publication; *buffer is where
  // (Board::kHeaderRoom bytes of header, then the data).
  Status claim(Call& call, uint8_t** buffer);
  // Publishes what claim()'s buffer holds: `bytes` of data, or a header-only
  // announcement (Board::carries_data false).
  void publish(uint32_t bytes);
  // Waits for `peer`'s publication of the same number; *buffer and *bytes
  // as it published them.
  Status await(Call& call, int peer, const uint8_t** buffer, uint32_t* bytes);
  // Who reads a publication of this rank: every peer (a one-shot call),
  // its two ring neighbours by rank number (an argument check), or nobody
  // (an announcement, read only by a peer that called something else).
  enum class Readers { kEveryone, kNeighbours, kNobody };
  // This rank read all it needs of the current publication of every rank
  // (`read_all`: it awaited every peer's), and `readers` read its own; the
  // next claim() takes the next number.
  void finish(Readers readers, bool read_all) {
    readers_[next_ & 1] = readers;
    if (read_all) all_done_ = next_;  // every peer published next_, so is done with next_ - 1
    ++next_;
  }

  // Bytes this rank's publications carried to `peer`, header included, as
  // the caller counts them (it knows who reads what: count_sent, or
  // count_sent_to_all for every peer); bytes read from `peer` (await counts
  // its header and data). For rrCommGetPeerBytes.
  void count_sent(int peer, uint64_t bytes) { sent_to_[static_cast<size_t>(peer)] += bytes; }
  void count_sent_to_all(uint64_t bytes) { sent_to_all_ += bytes; }
  uint64_t bytes_sent(int peer) const;
  uint64_t bytes_read(int peer) const;

 private:
  static constexpr int kOwnCorePolls = 4096;
  static constexpr int kSharedCorePolls = 16;
  // Waits for `peer`'s publication `n` (`claiming`: before this rank's next).
  Status wait_for(Call& call, int peer, uint64_t n, bool claiming);
  void sleep(int timeout_ms) override;

  transport::Transport* transport_;
  transport::shm::Board* board_;
  int rank_;
  uint64_t next_ = 0;      // this rank's next publication
  uint64_t all_done_ = 0;  // every rank is done with every publication below this
  Readers readers_[2] = {Readers::kNobody, Readers::kNobody};  // of the last two, by parity
  // What sleep() waits for: `sleep_peer_`'s publication `sleep_for_`.
  int sleep_peer_ = -1;
  uint64_t sleep_for_ = 0;
  uint64_t sent_to_all_ = 0;
  std::vector<uint64_t> sent_to_;
  std::vector<uint64_t> bytes_read_;
};

}  // namespace rr::exec
