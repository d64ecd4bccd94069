#pragma once
// Runs publications on a same-host board (transport/shm/board.hpp): the
// waits of the one-shot schedules (comm/one_shot.cpp), with liveness, the
// deadline and the interrupt watched as the other executors do
// (exec/wait_policy.hpp). What a publication holds and how it is reduced is
// the caller's business; this counts the publications, keeps a rank from
// overwriting a buffer a peer may still read, and waits.
//
// Each rank publishes 0, 1, 2, ... in the same order and finishes each
// once it has read what it needs of every rank's same publication: a
// publication n of every peer also says that the peer finished n - 1 (a rank
// finishes a publication before it makes the next), so a rank that read
// everyone's n may write n + 1 without looking; after an announcement (read
// by nobody here) it looks at the peers' finished marks first.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "exec/wait_policy.hpp"
#include "transport/shm/board.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

using Clock = std::chrono::steady_clock;

// The call a publication belongs to, for waits and their errors.
struct BoardCall {
  const std::string* name = nullptr;  // "allreduce #7 (one-shot)"
  Clock::time_point deadline;
  Interrupt* interrupt = nullptr;
};

class BoardExecutor : private Sleeper {
 public:
  BoardExecutor(transport::Transport* transport, transport::shm::Board* board, int rank);

  size_t capacity() const { return board_->capacity(); }
  int ranks() const { return board_->ranks(); }

  // Waits until this rank may write its next publication; *buffer is where
  // (Board::kHeaderRoom bytes of header, then the data).
  Status claim(const BoardCall& call, uint8_t** buffer);
  // Publishes what claim()'s buffer holds: `bytes` of data or Board::kNoData.
  void publish(uint32_t bytes);
  // Waits for `peer`'s publication of the same number; *buffer and *bytes
  // as it published them.
  Status await(const BoardCall& call, int peer, const uint8_t** buffer, uint32_t* bytes);
  // This rank read all it needs of the current publication (of every rank):
  // the next claim() takes the next number. `read_all`: it awaited every peer.
  void finish(bool read_all);

  // Data bytes this rank published, and read from peers, ever (rrCommGetPeerBytes).
  uint64_t bytes_published() const { return bytes_published_; }
  uint64_t bytes_read(int peer) const;

 private:
  // After a still round waiting on `peer`: progress, liveness, deadline, interrupt.
  Status still(WaitPolicy& wait, const BoardCall& call, int peer, bool publishing);
  void sleep(int timeout_ms) override;

  transport::Transport* transport_;
  transport::shm::Board* board_;
  int rank_;
  uint64_t next_ = 0;           // this rank's next publication
  uint64_t all_finished_ = 0;   // every rank finished every publication below this
  // What sleep() waits for: `sleep_peer_`'s publication, or its finished mark.
  int sleep_peer_ = -1;
  bool sleep_for_finish_ = false;
  uint64_t bytes_published_ = 0;
  std::vector<uint64_t> bytes_read_;
};

}  // namespace rr::exec
