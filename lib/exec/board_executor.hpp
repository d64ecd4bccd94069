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
// n - 1 says it is done with n - 2, whose buffer n reuses. A rank that read
// every peer's n - 1 knows that already; after an announcement (which it
// read nobody's for) it looks at the peers' n - 1 first.
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
#include "exec/wait_policy.hpp"
#include "transport/shm/board.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

// The call a publication belongs to, for waits and their errors.
struct BoardCall {
  const char* collective = "";  // "allreduce"
  uint64_t sequence = 0;
  const char* schedule = "";  // "one-shot"
  std::chrono::milliseconds timeout{0};
  Interrupt* interrupt = nullptr;
  // Set at the call's first wait (of any of its pieces): timeout from then.
  std::chrono::steady_clock::time_point deadline{};

  // "allreduce #7 (one-shot)"
  std::string name() const;
  std::chrono::steady_clock::time_point until();
};

class BoardExecutor : private Sleeper {
 public:
  BoardExecutor(transport::Transport* transport, transport::shm::Board* board, int rank);

  size_t capacity() const { return board_->capacity(); }
  int ranks() const { return board_->ranks(); }

  // Waits until this rank may write its next publication; *buffer is where
  // (Board::kHeaderRoom bytes of header, then the data).
  Status claim(BoardCall& call, uint8_t** buffer);
  // Publishes what claim()'s buffer holds: `bytes` of data or Board::kNoData.
  void publish(uint32_t bytes);
  // Waits for `peer`'s publication of the same number; *buffer and *bytes
  // as it published them.
  Status await(BoardCall& call, int peer, const uint8_t** buffer, uint32_t* bytes);
  // This rank read all it needs of the current publication of every rank
  // (`read_all`: it awaited every peer's); the next claim() takes the next number.
  void finish(bool read_all) {
    if (read_all) all_done_ = next_;  // every peer published next_, so is done with next_ - 1
    ++next_;
  }

  // Data bytes this rank published, and read from `peer`, ever (rrCommGetPeerBytes).
  uint64_t bytes_published() const { return bytes_published_; }
  uint64_t bytes_read(int peer) const;

 private:
  static constexpr int kOwnCorePolls = 4096;
  static constexpr int kSharedCorePolls = 16;
  // Waits for `peer`'s publication `n` (`claiming`: before this rank's next).
  Status wait_for(BoardCall& call, int peer, uint64_t n, bool claiming);
  void sleep(int timeout_ms) override;

  transport::Transport* transport_;
  transport::shm::Board* board_;
  int rank_;
  uint64_t next_ = 0;      // this rank's next publication
  uint64_t all_done_ = 0;  // every rank is done with every publication below this
  // What sleep() waits for: `sleep_peer_`'s publication `sleep_for_`.
  int sleep_peer_ = -1;
  uint64_t sleep_for_ = 0;
  uint64_t bytes_published_ = 0;
  std::vector<uint64_t> bytes_read_;
};

}  // namespace rr::exec
