#pragma once
// The survivors' agreement on which ranks failed (rrCommShrinkFailed, as
// ULFM's MPI_Comm_shrink agrees on the failed group): a fault-tolerant
// consensus among the ranks still alive, with no coordinator (rank 0 may be
// the one that died). The flooding consensus of Cachin, Guerraoui and
// Rodrigues ("Introduction to Reliable and Secure Distributed Programming",
// 5.1) on this value: the set of failed ranks, which only grows.
//
// The failure detector is the transport's: a rank is failed once
// peer_status() says so (a same-host peer's pidfd, UCX's endpoint error for
// a peer on another host; believed when seen in two rounds of progress
// running, since the transport may report the loss before it matched what
// the peer sent just before leaving), or once a post to it fails as
// unreachable (UCX cannot make an endpoint to a rank on another host that
// is gone; found by the fuzzer across fake hosts). Such a rank is never waited for, also when it dies
// during the agreement. A rank that is alive but silent is waited for
// `silence`, then counted as failed too (timed_out() names it).
//
// Round r: each rank sends its set (as it stood when the round began) to
// every rank not in it, and waits for each of those: its round-r message,
// or its failure. Then:
//   - a message that says "decided D" (below): this rank decides D;
//   - no failure seen in the round and every message equal to its own set
//     F: it decides F;
//   - otherwise its set becomes the union of its own, every message's and
//     the ranks that failed in the round, and round r + 1 begins.
// A rank that decided sends "decided D" as its round r + 1 message to every
// rank not in D, and is done once those sends finished (or their peers
// failed). So when the ranks' sets agree and nobody dies, one round decides
// (the usual case: every survivor saw the same death before it called); a
// death during the agreement costs about two rounds more.
//
// Why every survivor decides the same D: a rank that decides F at round r
// heard, in round r, from every rank not in F, and each had F as its set
// when round r began; so any rank that decides by the rule at round r
// decides F, and any other live rank waits in round r + 1 for the decider's
// message (it is not in F), which is "decided F" unless the decider died,
// in which case every rank that adopted F tells the rest in the round after.
// This needs the detector to be right: a rank counted as failed for its
// silence may decide otherwise, and the shrink's exchange that follows
// (every survivor passes the decided list) then fails naming both lists.
//
// Messages: [magic u32][kind u32: 0 proposal, 1 decided][round u32]
// [the set: size bits], on exec::agreement_tag(epoch, round).

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "exec/algorithm.hpp"
#include "exec/wait_policy.hpp"
#include "transport/transport.hpp"

namespace rr::coll {

class Agreement final : public exec::Algorithm {
 public:
  // `failed`: the ranks this rank counts as failed when it starts (size()
  // entries; its own must be false). `epoch`: this agreement's number on
  // the communicator (its tags).
  // A rank silent for `silence` since the agreement began (or since the
  // last rank counted as failed for its silence) is counted as failed.
  Agreement(transport::Transport* transport, uint64_t epoch, std::vector<bool> failed,
            std::chrono::milliseconds silence);

  Status post(const std::string& what) override;
  Status progress(const std::string& what, exec::Round* round) override;
  // The agreement watches its peers itself (a failed one is no error).
  void needs(int* from, int* to) const override { *from = *to = -1; }
  Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const override;
  void cancel() override;

  // Once done: the ranks agreed failed, ascending.
  std::vector<int> decided() const;
  // The ranks this rank counted as failed because they stayed silent past
  // `silence` (alive as far as the transport could tell).
  const std::vector<int>& timed_out() const { return timed_out_; }
  // The round it decided in (0-based).
  int rounds() const { return round_ + 1; }

 private:
  enum Kind : uint32_t { kProposal = 0, kDecided = 1 };
  struct Peer {
    std::vector<uint8_t> in;
    transport::Completion recv;
    bool posted = false;     // a receive was posted (it must finish before `in` goes)
    bool waiting = false;    // a receive of this round is posted and not resolved
    bool loss_seen = false;  // peer_status() said failed once while waiting
  };

  // Sends this round's message to every rank not in the set, and (unless
  // decided) posts a receive from each.
  Status start_round(const std::string& what);
  // Moves every waiting receive on: a message taken, a peer failed or silent.
  Status settle(const std::string& what, bool* moved);
  // All of the round's receives resolved: decide or start the next round.
  Status finish_round(const std::string& what);
  // Takes `peer`'s message of this round: its set into the union, or its
  // decision.
  Status take(int peer, const std::string& what);
  bool sends_done() const;
  bool receives_done() const;
  void mark_failed(int peer);
  // A post to `peer` failed: whether because the peer is gone or cannot be
  // reached (then it counts as failed), not because of this rank.
  bool unreachable(int peer, const Status& posted) const;

  transport::Transport* transport_;
  const int rank_;
  const int size_;
  const uint64_t epoch_;
  const std::chrono::milliseconds silence_;
  exec::Clock::time_point silent_after_;
  std::vector<bool> failed_;      // the set as this round began
  std::vector<bool> next_;        // the union gathered in this round
  std::vector<bool> decision_;    // once decided
  bool decided_ = false;
  bool failure_seen_ = false;     // a rank failed (or fell silent) in this round
  bool all_equal_ = true;         // every message of this round carried failed_
  bool adopted_ = false;          // a message of this round said "decided"
  std::vector<bool> adopted_set_;
  int round_ = 0;
  std::vector<Peer> peers_;
  // Each round's outgoing message and sends: a send of an earlier round to
  // a slow peer may still be in flight (deques keep addresses stable).
  std::deque<std::vector<uint8_t>> out_;
  std::deque<transport::Completion> sends_;
  std::deque<int> send_peers_;
  std::vector<int> timed_out_;
};

}  // namespace rr::coll
