#pragma once
// The communicator: rank, size, settings, operation sequence numbers, the
// staging pool and the executor. It holds a transport through the interface
// only: how bytes move is not its business.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algo/ring.hpp"
#include "algo/schedule.hpp"
#include "algo/select.hpp"
#include "comm/call_settings.hpp"
#include "coll/binomial_tree.hpp"
#include "coll/halving_doubling.hpp"
#include "coll/one_shot.hpp"
#include "coll/recursive_doubling.hpp"
#include "comm/control.hpp"
#include "comm/operation_queue.hpp"
#include "comm/settings.hpp"
#include "comm/staged_collectives.hpp"
#include "common/status.hpp"
#include "exec/batch.hpp"
#include "exec/board_executor.hpp"
#include "exec/chain_executor.hpp"
#include "exec/ring_executor.hpp"
#include "exec/shm_ring_executor.hpp"
#include "exec/wait_policy.hpp"
#include "exec/wire.hpp"
#include "memory/staging_pool.hpp"
#include "ringreduce/ringreduce.h"
#include "transport/shm/board.hpp"
#include "transport/shm/slot_ring.hpp"
#include "transport/transport.hpp"

namespace rr {

// Stream-ordered calls (comm/stream_order.hpp), which only the CUDA build
// makes. The member is in both builds, so that this header, and every file
// that includes it, reads the same with and without CUDA (ccache then hands
// the CUDA-less wheel this build's objects: tests/python/test_packaging.py).
class StreamOrder;
struct StreamOrderDeleter {
  void operator()(StreamOrder* order) const;  // communicator.cpp
};

// It is the executors' interrupt: a wait ends early on rrCommAbort or on a
// peer's notice that it gave up (ControlChannel).
class Communicator final : public exec::Interrupt {
 public:
  // `keepalive` holds whatever the transport needs to outlive (the rendezvous).
  Communicator(int rank, int size, Settings settings, std::unique_ptr<transport::Transport> transport,
               std::shared_ptr<void> keepalive = nullptr);
  ~Communicator();

  // Sizes the staging pool and the executor; call once before any collective.
  Status init();
  // Exchanges one byte with each ring neighbour (the peers the transport
  // connected at once), so that those connections finish their handshake on
  // both sides before the communicator is handed out. A communicator nobody
  // progressed after it was made keeps them half open: reset then (a peer's
  // sockets shut), UCX 1.13's TCP lane reconnects them under its feet and
  // trips its own assertions (tcp_cm.c:519, tcp_iface.c:307) the next time
  // this communicator is progressed, even by rrCommAbort's notice
  // (bench/RESULTS.md, "Faults and chaos"). Call once every rank has its
  // communicator.
  Status greet_neighbours(exec::Clock::time_point until);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Settings& settings() const { return settings_; }
  // The timeout of the operations issued from now on (rrCommSetTimeout);
  // settings().timeout_ms until set. Any thread.
  void set_timeout(int timeout_ms) { timeout_ms_.store(timeout_ms, std::memory_order_relaxed); }
  int timeout_ms() const { return timeout_ms_.load(std::memory_order_relaxed); }
  using CallSettings = rr::CallSettings;  // comm/call_settings.hpp
  // While alive, the operations the driving thread issues take `settings`
  // (an Async call's, read when it was called): its timeout instead of
  // timeout_ms(), its schedule instead of RR_ALGO's.
  class CallScope {
   public:
    CallScope(Communicator* comm, const CallSettings& settings) : comm_(comm) { comm_->call_ = settings; }
    ~CallScope() { comm_->call_ = CallSettings(); }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    Communicator* comm_;
  };
  transport::Transport& transport() { return *transport_; }
  const memory::StagingPool& pool() const { return pool_; }

  // With a reducer (exec/reducer.hpp), it reduces the received chunks, with
  // this rank's values read from reduce_source (laid out as send).
  Status allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                   exec::Reducer* reducer = nullptr, const void* reduce_source = nullptr);
  // recv (recvcount elements) = op over ranks of send[rank * recvcount ...].
  Status reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype, rrRedOp_t op);
  // recv[r * sendcount ...] = rank r's send, on every rank.
  Status all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype);

  // MPI_Comm_split: ranks passing the same color >= 0 form a new communicator,
  // ranked by (key, rank here); a negative color opts out (*out stays null).
  // Collective over this communicator. `settings` are the new one's.
  Status split(int color, int key, const Settings& settings, std::unique_ptr<Communicator>* out);
  // rrCommShrink with the caller's list (comm/derive.cpp): the ranks not in
  // `exclude` (which they all pass alike; the excluded take no part) make a
  // new communicator, renumbered in the old order, over connections of
  // their own, with no store. Runs after a failure or a revocation broke
  // this communicator's calls. `settings` are the new one's.
  Status shrink(std::vector<int> exclude, const Settings& settings, std::unique_ptr<Communicator>* out);
  // shrink()'s exchanges and set-up once the list is checked; every wait
  // also ends at `watch` (another survivor left).
  Status shrink_steps(const std::vector<int>& exclude, const std::vector<int>& survivors, int new_rank, int new_size,
                      uint64_t epoch, exec::Clock::time_point until, const Settings& settings, exec::Interrupt* watch,
                      std::unique_ptr<Communicator>* out);
  // rrCommShrinkFailed (comm/derive.cpp): the ranks still alive agree on
  // which failed (coll/agreement.hpp: a rank the transport reports gone, or
  // one silent for the timeout), shrink those away as shrink() does, and
  // agree once more: the new communicator is kept only where nobody else
  // failed meanwhile, on every survivor alike. *excluded: the agreed ranks,
  // ascending.
  Status shrink_failed(const Settings& settings, std::unique_ptr<Communicator>* out, std::vector<int>* excluded);
  // rrCommAgreeFailed: that agreement alone (*failed: the agreed ranks,
  // ascending), for a framework that shrinks by the list itself. `known`:
  // ranks this rank counts as failed from the start, besides those its
  // transport reports gone (an earlier agreement's).
  Status agree_on_failed(int timeout_ms, std::vector<int>* failed, const std::vector<int>& known = {});
  // rrCommGetUniqueId (comm/derive.cpp): rank 0's `made` id (or why it
  // could not make one) to every rank; not ok on every rank when it failed.
  Status share_unique_id(const Status& made, rrUniqueId* id);
  // rrCommGrow's argument check: every rank passed the same nranks and id;
  // otherwise not ok on every rank, naming the first that differs.
  Status agree_on_growth(int nranks, const rrUniqueId& id);
  // What split() and shrink() share (comm/derive.cpp): connects `transport`
  // (rank `new_rank` of `new_size`) to `addresses` and makes *out on it,
  // set up as init does. Not ok when either failed (*out may then be set).
  // `watch`: also ends the set-up's waits (shrink: another survivor left).
  Status make_child(int new_rank, int new_size, const Settings& settings,
                    std::unique_ptr<transport::Transport> transport, std::vector<std::vector<uint8_t>> addresses,
                    std::unique_ptr<Communicator>* out, exec::Interrupt* watch = nullptr);

  // Pipelined chains: recv = root's send on every rank; root's recv = op over ranks of send.
  Status broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root);
  Status reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op, int root);

  // Rooted and direct collectives (torch.distributed's gather, scatter, all_to_all).
  Status gather(const void* send, void* recv, size_t count, rrDataType_t dtype, int root);
  Status scatter(const void* send, void* recv, size_t count, rrDataType_t dtype, int root);
  Status all_to_all(const void* send, void* recv, size_t count, rrDataType_t dtype);
  // MPI_Alltoallv: recv[rdispls[p] ...] (recvcounts[p] elements) = rank p's
  // send[its sdispls[rank] ...]; counts and displacements in elements,
  // size() of each. A count that disagrees with the peer's fails the call
  // (naming the peer) on every rank. Checked by lib/api/: the arrays, and
  // that no block overflows or overlaps the other buffer.
  Status all_to_all_v(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                      const size_t* recvcounts, const size_t* rdispls, rrDataType_t dtype);
  Status barrier();

  // Point-to-point. Inside a group (group_depth > 0) they are queued and
  // posted together by flush_group(); otherwise each completes before it returns.
  Status send(const void* buf, size_t count, rrDataType_t dtype, int peer, bool grouped) {
    return point_to_point(true, const_cast<void*>(buf), count, dtype, peer, grouped);
  }
  Status recv(void* buf, size_t count, rrDataType_t dtype, int peer, bool grouped) {
    return point_to_point(false, buf, count, dtype, peer, grouped);
  }
  Status flush_group();
  // flush_group() in two halves, for rrGroupEnd over several communicators:
  // each posts its sends and receives before any is waited on, so that
  // opposite transfers on two communicators cannot wait for each other.
  // poll_group() progresses once; *finished once every transfer completed
  // (the group is then empty again, as after a failure).
  Status post_group();
  Status poll_group(bool* finished);
  // Non-blocking point-to-point with a tag (0..2^31-1; exec/tags.hpp): post
  // now, finish in wait_p2p. `done` must stay put until then. A receive's
  // peer may be transport::kAnySource: done->peer is then the sender once
  // it matched. `driving`: the caller has the operation queue's turn and
  // posts now; otherwise an operation is running on another thread, and the
  // post is handed to it (transport::Transport::post_later) instead of
  // waiting for it to end.
  Status post_p2p(bool is_send, void* buf, size_t count, rrDataType_t dtype, int peer, int tag,
                  transport::Completion* done, bool driving = true);
  // Drives progress until `done` (block) or once (!block); *finished says which.
  Status wait_p2p(const transport::Completion& done, bool is_send, size_t bytes, int peer, int tag, bool block,
                  bool* finished);
  bool has_grouped() const { return group_->size() != 0; }

  // rrCommAbort, from any thread: the running operation and every later one
  // return at their next still round. Then, once no other thread is inside,
  // finish_abort() tells the peers and makes closing quick.
  void request_abort() { abort_requested_.store(true, std::memory_order_relaxed); }
  void finish_abort();
  // A notice of `kind` saying `text` to every peer (comm/control.hpp), at
  // most 100 ms for a peer that does not take it.
  void tell_everyone(wire::NoticeKind kind, std::string text);
  bool aborting() const { return abort_requested_.load(std::memory_order_relaxed); }
  // rrCommRevoke, from any thread (ULFM's MPI_Comm_revoke): the running
  // operation returns kRevoked at its next still round, as on an abort, and
  // every later one at once; then finish_revoke(), in the operations' order
  // (after the running one), tells every peer, whose pending and later calls
  // return kRevoked too. The communicator stays allocated and answers
  // queries; only its calls are refused.
  void request_revoke() { revoke_requested_.store(true, std::memory_order_relaxed); }
  bool revoke_requested() const { return revoke_requested_.load(std::memory_order_relaxed); }
  Status finish_revoke();
  // rrCommGetAsyncError: rrSuccess while the communicator is healthy, else
  // the result of the failure that broke it (here or, by notice, on a peer).
  rrResult_t async_error() const { return static_cast<rrResult_t>(async_error_.load(std::memory_order_relaxed)); }

  // The schedule `collective` takes for `count` elements of `dtype` on this
  // communicator (comm/algorithm_choice.cpp); algo::schedule_name() says it.
  algo::Schedule algorithm(exec::Collective collective, size_t count, rrDataType_t dtype) const;
  // Its name: "ring (shared memory)", "binomial tree", ... (rrCommGetAlgorithm).
  const char* algorithm_name(exec::Collective collective, size_t count, rrDataType_t dtype) const {
    return algo::schedule_name(algorithm(collective, count, dtype));
  }
  // Bytes this rank sent to and received from `peer`: the transport's and
  // the same-host slot rings' together (rrCommGetPeerBytes).
  uint64_t bytes_sent(int peer) const;
  uint64_t bytes_received(int peer) const;
  // Whether the ring's host-memory calls run on same-host slot rings
  // (comm/same_host_path.cpp) instead of the transport.
  bool uses_same_host_path() const { return shm_ring_ != nullptr; }
  // Whether small calls may take the one-shot schedules on a same-host board.
  bool has_board() const { return board_exec_ != nullptr; }
  // The rank at each position of the ring (and the chain): each host's
  // ranks together (RR_RING_ORDER=topology, algo/ring_order.hpp) or rank order.
  std::vector<int> ring_order() const;

  // exec::Interrupt.
  Status check() override;
  bool take_dump_request() override { return dump_requested_.exchange(false, std::memory_order_relaxed); }

  // Logs this rank's state (rrCommDump, SIGUSR1); from any thread. The
  // running operation, if any, adds what it waits for at its next still round.
  void dump();

  // Every operation of this communicator runs through it (lib/api/ does so).
  OperationQueue& queue() { return queue_; }

  // The idle-progress thread's round on this communicator, with its turn
  // (comm/idle_progress.hpp): progresses the transport until it runs dry
  // and arms it; *fd is then the descriptor to sleep on (-1: none), and
  // *pending says that events wait already. Nothing once it failed or is
  // aborting.
  void progress_while_idle(int* fd, bool* pending);

  // A stream-ordered call (comm/stream_order.hpp): queues `body` after the
  // work enqueued on `stream` so far, and makes later work on the stream wait
  // for it; returns once it is queued. `device` is the buffers' GPU (-1: the
  // calling thread's current one). With `until_done` (an Async form's call),
  // *until_done waits on the host for the call's end on the stream and
  // returns its host half's outcome (StreamOrder::submit). `own`: the
  // call's own settings (rrCollConfig_t), the host half's; by default the
  // communicator's when it runs. Only the CUDA build has them; elsewhere
  // this is InvalidUsage naming `call`.
  Status enqueue_on_stream(const char* call, void* stream, int device,
                           const std::function<StagedCollectives::Plan(const StagedCollectives& staged)>& make,
                           std::function<Status()>* until_done = nullptr, const CallSettings& own = {});
  // An operation failed after its caller returned (stream-ordered calls):
  // rrCommGetAsyncError reports it and rrGetLastError(comm) says what it was.
  // A CUDA failure breaks the communicator, as a failed collective does: its
  // peers may be waiting for this rank's next segment.
  void report_async_failure(const Status& failure);

  // The last error's text; rrGetLastError(comm) returns a copy. Threads may
  // fail on one communicator at once, hence the lock.
  std::string last_error() const {
    std::lock_guard<std::mutex> lock(last_error_mutex_);
    return last_error_;
  }
  void set_last_error(const std::string& text) {
    std::lock_guard<std::mutex> lock(last_error_mutex_);
    last_error_ = text;
  }

 private:
  Status check_usable();
  // Exchanges this call's header with both ring neighbours and compares;
  // not ok, on this rank and (by notice) every other, when they differ. On
  // the same-host board when there is one, else through the transport.
  // `shape`: how the ring or chain will cut the call (ring_shape(),
  // chain_shape()), compared too; none for the other schedules.
  Status agree(const exec::Call& call, const wire::RingShape& shape = {});
  // A call of `collective` issued now: the next sequence number, a deadline
  // RR_TIMEOUT_MS from its first wait, this communicator as its interrupt,
  // the ring order. `count` as the caller passed it (the wire header's).
  exec::Call issue(exec::Collective collective, const void* send, void* recv, size_t count, rrDataType_t dtype,
                   rrRedOp_t op = rrSum, int root = -1);
  // `peer` sent `theirs` for the call this rank made as `mine`: fails the
  // operation, naming both calls, and tells every rank (a mismatch notice).
  Status disagreement(const wire::OpHeader& mine, const wire::OpHeader& theirs, int peer);
  // Records that `failure` broke the communicator and tells every peer once
  // (unless aborting: the abort tells them).
  Status fail_operation(Status failure, wire::NoticeKind kind = wire::NoticeKind::kFailed);
  // After this rank's own timeout: `timeout` plus what the other ranks that
  // timed out at the same time waited on, and which ranks stayed silent.
  Status gather_timeouts(const Status& timeout);
  Status point_to_point(bool is_send, void* buf, size_t count, rrDataType_t dtype, int peer, bool grouped);
  // all_to_all_v's count check (RR_CHECK_ARGUMENTS): every pair of ranks
  // swaps what each sends the other and expects from it.
  Status agree_counts(const exec::Call& call, const size_t* sendcounts, const size_t* recvcounts);
  // Runs `batch_` as operation `name` until `until`, marking the
  // communicator unusable when a failure may have left transfers in flight;
  // *first_received: the bytes the batch's first transfer (a receive) took.
  Status run_batch(exec::Batch& batch, const std::string& name, exec::Clock::time_point until,
                   size_t* first_received = nullptr);
  // One timeout from now (the init-time exchanges, point-to-point).
  Status run_batch(exec::Batch& batch, const std::string& name) { return run_batch(batch, name, deadline()); }
  // The same, as a part of `call` (named by its label, until its deadline).
  Status run_batch(exec::Batch& batch, exec::Call& call, size_t* first_received = nullptr) {
    return run_batch(batch, label(call), call.until(), first_received);
  }
  // `call`'s label, written into operation_name_: a call's data path must
  // neither allocate nor format (snprintf was a tenth of an 8-byte recursive
  // doubling call).
  const std::string& label(const exec::Call& call) {
    call.write_label(&operation_name_);
    return operation_name_;
  }
  // How the chain cuts `call` (RR_CHUNK_BYTES, RR_PIPELINE_DEPTH).
  Status chain_shape(const exec::Call& call, wire::RingShape* shape) const;
  // Broadcast or reduce (call.collective) along the chain, cut as `shape`.
  Status run_chain(exec::Call& call, const wire::RingShape& shape);
  // Broadcasts and reduces up to this size take a binomial tree (log2 N hops,
  // latency-bound) instead of the chain (N - 1 hops, bandwidth-bound); one
  // chunk, so a partial result always fits a staging slot.
  size_t tree_bytes() const { return std::min<size_t>(settings_.chunk_bytes, size_t{64} << 10); }
  // Whether a broadcast / reduce of `bytes` takes the tree (else the chain);
  // the same on every rank.
  bool broadcast_by_tree(size_t bytes) const;
  bool reduce_by_tree(size_t bytes) const;
  // The timeout an operation issued now takes, and its deadline.
  std::chrono::milliseconds current_timeout() const {
    return std::chrono::milliseconds(call_.timeout_ms > 0 ? call_.timeout_ms : timeout_ms());
  }
  exec::Clock::time_point deadline() const { return exec::Clock::now() + current_timeout(); }
  // The allreduce schedule for `bytes` (comm/algorithm_choice.cpp); logs
  // the choice at RR_DEBUG=INFO when it changes.
  algo::AllreduceAlgo allreduce_algo(size_t bytes, bool has_reducer);
  // Runs `algorithm` (prepared for `call`) to its end on this thread
  // (exec::drive), as a part of `call` (named by its label, until its
  // deadline), marking the communicator unusable when it failed.
  Status run(exec::Algorithm& algorithm, exec::Call& call) {
    return fail_operation(exec::drive(algorithm, label(call), call, transport_.get()));
  }
  // Allreduce by recursive doubling (coll/recursive_doubling.hpp), whose
  // messages carry `header` (the argument check); barrier() runs it too, as
  // a one-byte max.
  Status allreduce_recursive_doubling(exec::Call& call, const wire::OpHeader& header);
  // The one-shot schedule on the same-host board (coll/one_shot.hpp): its
  // publications carry `header` (the argument check); barrier() runs it too,
  // as a one-byte max.
  Status allreduce_one_shot(exec::Call& call, const wire::OpHeader& header);
  // Publishes `header` on the board, without data, when there is one: a
  // peer waiting there then sees that this rank sends frames through UCX.
  Status announce(const exec::Call& call, const wire::OpHeader& header);
  // agree() on the same-host board: publishes `mine` without data and
  // compares both ring neighbours' publications with it.
  Status agree_on_board(const exec::Call& call, const wire::OpHeader& mine);
  // Runs `call` on the board as `kind` (comm/one_shot.cpp).
  Status run_on_board(coll::OneShot::Kind kind, const exec::Call& call, const wire::OpHeader& header);
  // How the ring cuts `count` elements of `dtype`: chunks of RR_CHUNK_BYTES
  // cut so that every wave of `depth` columns is full
  // (algo::balanced_chunk_elems), or a slot of the same-host slot rings.
  // `staged`: a call of the staging pipeline (a reducer), which keeps the
  // transport's ring.
  Status ring_shape(const exec::Call& call, size_t count, bool staged, wire::RingShape* shape) const;
  // Runs the ring over `count` elements (the whole ring buffer) of `call`
  // with the given phases, cut as `shape`.
  Status run_ring(exec::Call& call, size_t count, int shift, algo::RingPhases phases, const wire::RingShape& shape);

  // Sets ring_order_ from where the transport says the ranks run; logs it.
  void choose_ring_order();
  // When every rank runs on this host: each makes the slot ring its left
  // neighbour will send on, attaches to its right neighbour's, and all use
  // them only if every rank could (rank 0 collects the votes). Collective;
  // called by init() after choose_ring_order(). Logs the outcome.
  Status setup_same_host_path();
  // Unless RR_PIPELINE_DEPTH or the config set it, raises
  // settings_.pipeline_depth to cover the longest round trip between ring
  // neighbours on different hosts at their links' rate; every rank gets
  // rank 0's answer. Collective; called by init() after choose_ring_order(),
  // before the staging pool and the executors are made. Logs the outcome.
  Status size_pipeline();

  int rank_;
  int size_;
  Settings settings_;
  std::vector<int> ring_order_;  // empty: rank order
  algo::HostShape host_shape_;   // where the ranks run, for the allreduce selector
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<void> keepalive_;
  memory::StagingPool pool_;
  std::unique_ptr<exec::RingExecutor> ring_;
  // The same-host path, when set up: the ring from the left neighbour (this
  // rank made it), the right neighbour's, and the executor on them.
  std::unique_ptr<transport::shm::SlotRing> shm_from_left_;
  std::unique_ptr<transport::shm::SlotRing> shm_to_right_;
  std::unique_ptr<exec::ShmRingExecutor> shm_ring_;
  int shm_left_ = -1, shm_right_ = -1;
  // The CPUs this host's ranks may use together (the union of their
  // affinity masks, comm/same_host_path.cpp); 0: unknown (ranks on several hosts).
  int host_cpus_ = 0;
  // The board of the one-shot schedules, when set up (comm/same_host_path.cpp).
  std::unique_ptr<transport::shm::Board> board_;
  std::unique_ptr<exec::BoardExecutor> board_exec_;
  std::unique_ptr<coll::OneShot> one_shot_;  // on board_exec_
  std::unique_ptr<exec::ChainExecutor> chain_;
  // The algorithms on point-to-point batches, one of each, reused call after
  // call (coll/): nothing is allocated on a call's data path.
  std::unique_ptr<coll::RecursiveDoubling> recursive_doubling_;
  std::unique_ptr<coll::HalvingDoubling> halving_doubling_;
  std::unique_ptr<coll::BinomialTree> tree_;
  std::unique_ptr<exec::Batch> batch_;  // direct collectives, one at a time
  std::unique_ptr<exec::Batch> group_;  // sends and receives queued by a group
  std::string group_name_;              // ... and, once posted by post_group(), its name
  exec::Clock::time_point group_deadline_;  // ... and deadline
  std::atomic<uint64_t> sequence_{0};  // atomic only so that dump() may read it
  std::atomic<int> timeout_ms_;        // set_timeout()
  CallSettings call_;                  // CallScope's, on the driving thread
  std::atomic<bool> dump_requested_{false};
  std::unique_ptr<ControlChannel> control_;  // none for one rank
  Status remote_;  // the first notice from a peer that gave up
  bool heard_timeout_ = false;  // ... and it said it timed out
  int remote_origin_ = -1;      // ... and who it was
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> revoke_requested_{false};  // rrCommRevoke here
  uint64_t shrinks_ = 0;      // shrink()s of this communicator so far: each exchange has tags of its own
  // While a shrink sets this communicator up (make_child's watch): looked
  // at first by check(), so that its waits end when that shrink is left.
  exec::Interrupt* setup_watch_ = nullptr;
  uint64_t agreements_ = 0;   // shrink_failed()'s agreements so far: each has tags of its own
  Status revoked_;            // kRevoked once this rank revoked or heard a peer's revocation
  bool revocation_told_ = false;  // the peers were sent a kRevoked notice
  std::atomic<int> async_error_{rrSuccess};
  uint8_t header_out_[wire::kOpHeaderBytes] = {};
  uint8_t header_left_[wire::kOpHeaderBytes] = {};
  uint8_t header_right_[wire::kOpHeaderBytes] = {};
  // agree_counts(): [peer][sends, expects], ours and theirs (sized at init).
  std::vector<uint64_t> counts_out_, counts_in_;
  std::mutex stream_order_mutex_;
  // CUDA build: made at the first stream-ordered call; null without CUDA.
  std::unique_ptr<StreamOrder, StreamOrderDeleter> stream_order_;
  OperationQueue queue_;  // last member: its worker stops before anything it uses goes
  Status broken_;  // set once an operation left the transport in an unknown state
  algo::AllreduceAlgo last_algo_ = algo::AllreduceAlgo::kAuto;  // for the log: the last choice
  size_t last_algo_bytes_ = 0;
  size_t chosen_bytes_ = SIZE_MAX;  // the last call's size and choice
  algo::AllreduceAlgo chosen_algo_ = algo::AllreduceAlgo::kAuto;
  std::string operation_name_;  // reused by calls that must not allocate (recursive doubling)
  // Set once this communicator failed or is aborting: its peers may leave at
  // any moment, and its transport is left unprogressed when it closes.
  bool expects_peer_loss_ = false;
  void expect_peer_loss() {
    expects_peer_loss_ = true;
    transport_->expect_peer_loss();
  }
  mutable std::mutex last_error_mutex_;
  std::string last_error_;
};

}  // namespace rr
