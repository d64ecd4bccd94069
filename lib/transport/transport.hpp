#pragma once
// The transport: post a send or a receive of a byte range to a peer with a
// tag, progress, cancel, and count bytes. It knows nothing of collectives.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.hpp"

namespace rr::transport {

// Tags are 48 bits of the caller's choosing; the transport adds the source
// rank above them so a receive matches exactly one sender.
constexpr int kTagBits = 48;
constexpr uint64_t kTagMask = (uint64_t{1} << kTagBits) - 1;

// post_recv's peer for a receive that matches the first message with its tag
// from any rank. Why the interface has it: a rank that waits for whichever
// peer speaks first (MPI_ANY_SOURCE, torch.distributed's recv without a
// source) cannot post one receive per peer and cancel the others, since a
// second message could then match a receive meant to be canceled. Only the
// transport can match on the tag alone (UCX: a tag mask that ignores the
// source bits). The Completion's `peer` becomes the sender once done.
constexpr int kAnySource = -2;

// Filled in by the transport, on the thread that calls progress(), when the
// operation ends. The caller owns it and keeps it alive until `done`.
struct Completion {
  bool done = false;
  bool failed = false;
  int error = 0;        // transport-specific code, for describe_error()
  size_t bytes = 0;     // bytes received (receives only)
  int peer = -1;        // as posted; a kAnySource receive's sender once it matched
  void* handle = nullptr;  // the transport's request, while in flight
  void* owner = nullptr;   // the transport that posted it, for its completion callbacks

  void reset() { *this = Completion(); }
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Starts sending [buf, buf + bytes) to `peer`; `done` is set once `buf` may be reused.
  virtual Status post_send(int peer, uint64_t tag, const void* buf, size_t bytes,
                           Completion* done) = 0;
  // Starts receiving at most `bytes` from `peer` (or kAnySource) into `buf`.
  // Messages from one sender with one tag match receives in the order sent.
  virtual Status post_recv(int peer, uint64_t tag, void* buf, size_t bytes, Completion* done) = 0;
  // Makes a pending receive finish (failed, error = canceled) at a later
  // progress(); one that post_later() still holds finishes (failed) at once.
  void cancel(Completion* pending) {
    if (!withdraw(pending)) cancel_posted(pending);
  }

  // Drives outstanding operations, after making the posts post_later()
  // queued; true when something happened.
  bool progress() {
    if (has_later_.load(std::memory_order_acquire)) post_queued();
    return progress_posted();
  }
  // progress() by the idle-progress thread, between calls. A peer that
  // leaves now (UCX reports the endpoint of a peer that destroyed its
  // communicator first as failed) has left after its last call, as far as
  // this rank knows: the next call that needs it fails naming it, and
  // closing still tears the transport down (expect_peer_loss()'s leaving it
  // as it is is for a communicator that failed or aborted).
  bool progress_between_calls() {
    between_calls_ = true;
    const bool moved = progress();
    between_calls_ = closing_;
    return moved;
  }
  // From the communicator's orderly destroy on (its last call ended): a peer
  // that leaves while it closes (one that destroyed its own first) left
  // after its last call too, as between calls. Counted as a failure there,
  // it left this transport's whole UCX context behind (ucx/ucx_transport,
  // abandon_at_close): one in about ten destroys of a split on two hosts
  // (tests/integration/comm_churn_test.cpp).
  void begin_close() { between_calls_ = true; closing_ = true; }

  // For a thread that must not wait for the one driving the transport (a
  // point-to-point post beside a running collective): from any thread,
  // queues a post that the driving thread makes at its next progress(), in
  // the order queued. `done` is reset now; a post the transport refuses
  // finishes failed, and describe_error() then says why.
  void post_later(bool is_send, int peer, uint64_t tag, void* buf, size_t bytes, Completion* done);
  // Makes the queued posts now: by the driving thread, before a post of its
  // own that must follow them (messages of one sender and tag match in order).
  void post_queued();
  // Sleeps until the transport may have something to progress, at most timeout_ms.
  virtual void wait_for_events(int timeout_ms) = 0;

  // For a thread that sleeps until an idle transport has something to do
  // (comm/idle_progress.hpp), once progress() ran dry: kArmed when
  // event_fd() turns readable at the next event, kBusy when events wait
  // already (progress again), kNoEvents when it has no such descriptor.
  enum class Arm { kArmed, kBusy, kNoEvents };
  virtual Arm arm_events() { return Arm::kNoEvents; }
  virtual int event_fd() const { return -1; }

  // A send is done once its buffer may be reused, which on some lanes comes
  // before all of its bytes have left this process: UCX's TCP lane copies a
  // send below its zero-copy threshold, reports it done, and keeps what the
  // socket did not take for a later progress() (which the idle-progress
  // thread makes while no call does). A rank about to stop progressing for
  // good (a failed one telling its peers why) flushes: begin_flush() starts
  // pushing out everything sent since the last flush, and
  // flush_waiting_for() is a peer whose flush is still under way, -1 once
  // none is (a flush that failed is over). Driven by progress(), on the
  // thread that drives the transport. On UCX's TCP lane a flush also waits
  // for the peer's acknowledgment, which takes the peer's progress: bound
  // the wait.
  virtual void begin_flush() {}
  virtual int flush_waiting_for() const { return -1; }

  // Sub-communicators: a fresh transport of the same kind for `size` ranks,
  // whose address (local_address) the caller exchanges and hands to connect().
  virtual Status make_sibling(int rank, int size, std::unique_ptr<Transport>* out) const = 0;
  virtual const std::vector<uint8_t>& local_address() const = 0;
  // Takes every rank's address (indexed by rank); connects to `eager_peers` now.
  virtual Status connect(std::vector<std::vector<uint8_t>> addresses, const std::vector<int>& eager_peers) = 0;

  // Registers host memory that will be sent from or received into often
  // (the staging pool), for transports that profit from it.
  virtual Status register_memory(void* ptr, size_t bytes) = 0;
  // Drops the registration that starts at `ptr` (none: nothing), before the
  // memory goes.
  virtual void deregister_memory(void* ptr) = 0;

  // How long closing may wait for queued sends to reach live peers (the
  // default is the transport's own); rrCommAbort shortens it.
  virtual void set_close_timeout(std::chrono::milliseconds /*limit*/) {}
  // The communicator failed or is aborting: its peers may leave at any
  // moment, and their leaving is no longer news. The UCX transport then
  // keeps UCX's own lines about it off the output (ucx/ucx_log.hpp) and,
  // when it closes, leaves its worker as it is instead of tearing it down.
  virtual void expect_peer_loss() {}

  // Not ok once `peer` has failed or disconnected; the message names it.
  // Cheap enough for a wait loop: a transport may look at a peer's process
  // only every few milliseconds.
  virtual Status peer_status(int peer) const = 0;
  // Looks at every peer now, so that the peer_status() calls right after
  // know every loss that has happened (a call that failed on one peer names
  // the others gone by then, not only the first it saw).
  virtual void check_peers_now() {}
  // Ranks of this transport on this rank's host, itself included, once
  // connected (a transport that cannot tell says 1).
  virtual int same_host_ranks() const { return 1; }
  // Once connected: each rank's host, as small ints (equal: one host, by the
  // same test as same_host_ranks()); empty where the transport cannot tell.
  virtual std::vector<int> host_of_ranks() const { return {}; }
  // Once connected: each rank's NUMA node as it reported it (-1: unknown);
  // empty where the transport cannot tell.
  virtual std::vector<int> numa_of_ranks() const { return {}; }
  // How `peer` is reached: the transport's own words for it (UCX's lanes,
  // "tl/device" each, e.g. "tcp/eth0 cma/memory"; empty where the
  // transport cannot tell), and what they mean to the engine.
  struct Path {
    std::string text;
    bool shared_memory = false;  // a lane through this host's memory
    bool tcp = false;            // a lane over TCP sockets
  };
  virtual Path path(int /*peer*/) const { return {}; }
  std::string describe_error(const Completion& c) const;

  // Safe to read from any thread while another drives the transport.
  uint64_t bytes_sent(int peer) const { return counters(peer).sent.load(std::memory_order_relaxed); }
  uint64_t bytes_received(int peer) const { return counters(peer).received.load(std::memory_order_relaxed); }

 protected:
  bool between_calls_ = false;  // inside progress_between_calls(), or closing
  bool closing_ = false;         // begin_close(): between calls for good
  virtual void cancel_posted(Completion* pending) = 0;
  virtual bool progress_posted() = 0;
  virtual std::string describe_posted_error(const Completion& c) const = 0;

  struct Counters {
    std::atomic<uint64_t> sent{0};
    std::atomic<uint64_t> received{0};
  };
  virtual const Counters& counters(int peer) const = 0;

 private:
  // Takes a post that post_later() still holds out of the queue, failed.
  bool withdraw(Completion* pending);

  struct Later {
    bool is_send;
    int peer;
    uint64_t tag;
    void* buf;
    size_t bytes;
    Completion* done;
  };
  std::mutex later_mutex_;
  std::vector<Later> later_;
  std::atomic<bool> has_later_{false};
  // Why a queued post failed, for describe_error(): the transport refused
  // it, or it was canceled before it was made.
  mutable std::mutex refused_mutex_;
  std::unordered_map<const Completion*, std::string> refused_;
};

}  // namespace rr::transport
