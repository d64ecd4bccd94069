#pragma once
// A batch of point-to-point transfers posted together and completed together:
// what gather, scatter, all-to-all and a group of sends and receives are made
// of. Posting every receive before any send means a batch in which every rank
// both sends and receives (a ring shift) cannot deadlock.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "exec/algorithm.hpp"
#include "exec/wait_policy.hpp"
#include "transport/transport.hpp"

namespace rr::exec {

struct Transfer {
  bool is_send = false;
  int peer = -1;
  uint64_t tag = 0;
  void* buf = nullptr;  // const for sends
  size_t bytes = 0;
  // Posted even when empty, so that the receiver sees a count that
  // disagrees with its own (all-to-all-v); otherwise both sides skip it.
  bool post_empty = false;
  // A receive that takes any message of at most `bytes` (its length is then
  // the caller's to check, in done.bytes); otherwise it must be exactly `bytes`.
  bool up_to = false;
  transport::Completion done;
};

// An Algorithm (exec/algorithm.hpp) of one step: every transfer posted at
// once, done when all are.
class Batch final : public Algorithm {
 public:
  explicit Batch(transport::Transport* transport) : transport_(transport) {}

  void clear() { transfers_.clear(); }
  // Sends to a peer the transport already knows gone fail that transfer
  // only, not the whole post: every live peer still gets its message before
  // the batch fails (a survivor that leaves a shrink must reach every other
  // survivor, whichever rank died first). Otherwise the first such send
  // fails post() and nothing after it is posted.
  void post_past_lost_peers() { past_lost_peers_ = true; }
  // Keeps room for `n` transfers so that add() does not allocate on the data path.
  void reserve(size_t n) { transfers_.reserve(n); }
  // An empty transfer (bytes == 0) is skipped unless `post_empty`: then it
  // is a zero-byte message, which a receive of any other size fails on.
  void add_send(int peer, uint64_t tag, const void* buf, size_t bytes, bool post_empty = false);
  void add_recv(int peer, uint64_t tag, void* buf, size_t bytes, bool post_empty = false);
  // A receive of any length up to `capacity`: read transfer(i).done.bytes after run().
  void add_recv_up_to(int peer, uint64_t tag, void* buf, size_t capacity);
  const Transfer& transfer(size_t i) const { return transfers_[i]; }
  size_t size() const { return transfers_.size(); }

  // Posts every receive, then every send, and waits until all completed, a
  // peer failed, `deadline` passed or `interrupt` fired (exec::drive). `what`
  // names the operation in errors.
  // On failure, pending receives are canceled before it returns.
  Status run(const std::string& what, std::chrono::steady_clock::time_point deadline, Interrupt* interrupt = nullptr) {
    return drive(*this, what, deadline, interrupt, transport_);
  }

  // Algorithm. post(): every receive, then every send (failing, it cancels
  // what it posted); progress(): one round of the transport, checking each
  // transfer that completed; needs(): the peer of a transfer not done, each
  // pending one in turn from call to call (a batch waits on several peers
  // at once: a dead one behind a live but stuck one must be seen too);
  // stalled(): "what: rank 0 waited to receive 32 bytes from rank 1" (the
  // transfer of the failed peer, when one is named; else the first pending).
  Status post(const std::string& what) override;
  Status progress(const std::string& what, Round* round) override;
  void needs(int* from, int* to) const override;
  Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const override;
  // Cancels pending receives and gives sends kDrainLimit to retire.
  void cancel() override;

  // stalled() for an algorithm that runs a batch per step: `step` says
  // where the call is ("step 2 of 3") beside the batch's own count.
  Status stalled_at(const std::string& what, const std::string& step, Code code, const std::string& cause,
                    int failed_peer = -1) const;
  // The first transfer not done (null: none); with `peer` >= 0, the first
  // not done with that peer, if any.
  const Transfer* waiting(int peer = -1) const;

  // One round of progress with the checks of a still round (exec::drive_round),
  // for a caller that waits on several batches at once (rrGroupEnd over
  // several communicators posts every batch before it waits on any) and
  // pauses between rounds itself: the wait here only spins, and lasts from
  // post() to the end (a peer seen gone in one poll is failed in the next).
  // *finished when every transfer completed. Failing, it cancels what is
  // still pending.
  Status poll(const std::string& what, std::chrono::steady_clock::time_point deadline, Interrupt* interrupt,
              bool* finished);

 private:
  Status check(const Transfer& t, const std::string& what) const;

  transport::Transport* transport_;
  std::vector<Transfer> transfers_;
  size_t finished_ = 0;  // transfers done at the last round
  bool past_lost_peers_ = false;
  mutable size_t next_needed_ = 0;  // where needs() looks first
  std::optional<WaitPolicy> poll_wait_;  // poll()'s, made at its first call after post()
};

}  // namespace rr::exec
