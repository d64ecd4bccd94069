#pragma once
// The UCX transport: one UCP context and worker per communicator, tagged
// non-blocking send/recv, endpoints made on first use (eagerly for the ring
// neighbours), error handling mode PEER so that a dead peer fails its
// operations instead of hanging them.

#include <poll.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transport/transport.hpp"

namespace rr::transport {

class UcxTransport final : public Transport {
 public:
  // Makes the context and worker. Peers are reachable after connect().
  // `numa_node`: where this rank runs (topo/numa.hpp; -1 unknown), told to
  // the peers in its address for the ring order.
  static Status Create(int rank, int size, std::unique_ptr<UcxTransport>* out, int numa_node = -1);
  ~UcxTransport() override;

  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  // What peers need to reach this rank, to publish through the bootstrap
  // store: [host identity : 16][pid : 4][NUMA node : 4][UCX worker address].
  const std::vector<uint8_t>& local_address() const override { return local_address_; }
  // Takes every rank's worker address (indexed by rank) and connects to `eager_peers` now.
  Status connect(std::vector<std::vector<uint8_t>> addresses, const std::vector<int>& eager_peers) override;
  Status make_sibling(int rank, int size, std::unique_ptr<Transport>* out) const override;

  // Names of the transports UCX chose to reach `peer`, e.g. "sysv/memory cma/memory".
  Path path(int peer) const override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "ucx"; }

  Status post_send(int peer, uint64_t tag, const void* buf, size_t bytes, Completion* done) override;
  Status post_recv(int peer, uint64_t tag, void* buf, size_t bytes, Completion* done) override;
  void cancel_posted(Completion* pending) override;
  bool progress_posted() override;
  void wait_for_events(int timeout_ms) override;
  Arm arm_events() override;
  int event_fd() const override { return event_fd_; }
  // Per endpoint (ucp_ep_flush_nbx): a worker-wide flush completes at once
  // while sends wait for room in a shared-memory FIFO.
  void begin_flush() override;
  int flush_waiting_for() const override;
  // Registers [ptr, ptr + bytes) with UCX for the lifetime of this transport.
  Status register_memory(void* ptr, size_t bytes) override;
  void deregister_memory(void* ptr) override;
  Status peer_status(int peer) const override;
  void check_peers_now() override;
  int same_host_ranks() const override;
  std::vector<int> host_of_ranks() const override { return host_of_ranks_; }
  std::vector<int> numa_of_ranks() const override { return numa_of_ranks_; }
  void set_close_timeout(std::chrono::milliseconds limit) override { close_timeout_ = limit; }
  void expect_peer_loss() override { abandon_at_close(); }
  std::string describe_posted_error(const Completion& c) const override;

 protected:
  const Counters& counters(int peer) const override { return counters_[peer]; }

 private:
  struct Peer {
    UcxTransport* owner = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    ucs_status_t failure = UCS_OK;  // set by UCX's error handler or the liveness check
    bool same_host = false;         // same kernel and pid namespace: shared memory, pid checks
    int32_t pid = 0;
    std::vector<uint8_t> address;   // the UCX worker address
    int pidfd = -1;                 // same-host peers: readable once the process has ended
    std::chrono::steady_clock::time_point next_liveness_check;
    bool unflushed = false;         // sent to since the last begin_flush()
    int flushing = 0;               // its endpoint's flushes under way
    int sends_in_flight = 0;        // sends to it that UCX has not finished
  };

  UcxTransport(int rank, int size);
  // Same-host peers only: notices a peer process that no longer exists.
  void check_liveness(Peer& p) const;
  // A same-host peer's process has ended.
  void mark_dead(Peer& p) const;
  // Once a peer has been lost (or may be): UCX's lines about it are expected.
  void note_loss() const;
  mutable bool loss_noted_ = false;
  // ... and, unless it left between calls (progress_between_calls()) or
  // with nothing of this rank's on its way to it (a peer that destroyed its
  // communicator first, while this rank ended its last call), the
  // transport is left as it is when it closes (~UcxTransport).
  void abandon_at_close() const;
  mutable bool abandon_at_close_ = false;
  // Whether same-host peers are reached through shared memory (learned from
  // the first same-host endpoint): then their endpoints take error mode NONE.
  std::vector<int> host_of_ranks_;  // by connect(): equal host identities, equal ints
  std::vector<int> numa_of_ranks_;  // by connect(): each rank's NUMA node, -1 unknown
  int numa_node_ = -1;              // this rank's, as Create() was told
  bool same_host_shm_ = true;
  bool same_host_checked_ = false;
  Status endpoint(int peer, ucp_ep_h* ep);
  void close_endpoints();
  std::chrono::milliseconds close_timeout_{2000};

  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_flush_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);

  int rank_;
  int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  // What wait_for_events sleeps on: the worker's event fd, then the pidfds of
  // the eagerly connected same-host peers, so a neighbour's death wakes us.
  std::vector<pollfd> wait_fds_;
  std::vector<uint8_t> local_address_;
  bool connected_ = false;
  std::vector<Peer> peers_;
  std::vector<std::pair<void*, ucp_mem_h>> registrations_;  // (address, handle)
  std::vector<Counters> counters_;
  std::vector<int> unflushed_;  // peers sent to since the last begin_flush(), once each
  mutable std::vector<int> flushing_;  // peers whose flush may be under way
};

}  // namespace rr::transport
