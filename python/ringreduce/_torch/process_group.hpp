#pragma once
// ProcessGroupRingreduce: torch.distributed's backend "ringreduce", a
// c10d::Backend over one ringreduce communicator (torch 2.x: a ProcessGroup
// holds one Backend per device type; this one serves "cpu", and "cuda" in
// the CUDA build). It is a client of the public C API only, as any framework
// that embeds ringreduce is.
//
// Every operation checks its arguments first (throwing with the operation's
// name), stages what the engine cannot use directly (non-contiguous tensors,
// lists of tensors laid end to end), issues the engine's ...Async call and
// returns a Work at once: the engine runs the calls in issue order, a
// Completer thread completes them. A collective torch waits for at once
// (opts.asyncOp false) is waited for on the caller's thread instead, and
// its Work comes back completed. Sends and receives are posted at once and
// finish in any order. A collective on CUDA tensors is ordered on a stream
// instead, with a DeviceWork (device_collective; device_seam.hpp).

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "device_seam.hpp"
#include "device_work.hpp"
#include "engine_call.hpp"
#include "errors.hpp"
#include "hooks.hpp"
#include "options.hpp"
#include "tensors.hpp"
#include "work.hpp"

namespace ringreduce_torch {

// The tags of monitoredBarrier's messages (monitored_barrier.cpp): send and
// recv refuse them, so that no user message is taken for a report.
constexpr int kMonitoredBarrierReportTag = INT_MAX;
constexpr int kMonitoredBarrierAnswerTag = INT_MAX - 1;

class ProcessGroupRingreduce : public c10d::Backend {
 public:
  using Options = RingreduceOptions;

  // Joins the communicator of `unique_id` (made by group rank 0 with
  // rrGetUniqueId) with `options`' settings; their timeout is every
  // operation's deadline in the engine.
  ProcessGroupRingreduce(int rank, int size, const rrUniqueId& unique_id, c10::intrusive_ptr<Options> options);
  // Takes `comm` over (split() makes it); `options` are what it was made with.
  ProcessGroupRingreduce(rrComm_t comm, c10::intrusive_ptr<Options> options);
  // A group made with enable_reconfigure=True: no communicator until
  // reconfigure() makes one from the members' handles (reconfigure.cpp);
  // until then every operation is refused by name.
  ProcessGroupRingreduce(int rank, int size, c10::intrusive_ptr<Options> options);
  // shutdown(), unless it ran already.
  ~ProcessGroupRingreduce() override;

  const std::string getBackendName() const override { return "ringreduce"; }

  // dist.split_group (and torch's ProcessGroup::splitGroup): torch calls
  // split() on every rank of this group, each with the list of group ranks it
  // belongs to (a rank in no list with the first one), in the new group's
  // rank order. One rrCommSplit over this communicator: color = the list's
  // lowest rank, key = the position in it; a rank not in its list gets no
  // color and nullptr. `opts` are the new group's options (a clone of
  // getBackendOptions()'s, its timeout torch's).
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // dist.shrink_group: the ranks not in `ranks_to_exclude` (torch's sorted
  // list, the same on every caller; the excluded ranks do not call) make the
  // new group's backend by one rrCommShrink over this communicator, with no
  // store and no new rendezvous, also after a failure broke it. With
  // SHRINK_ABORT (`shrink_flags` bit 0) this communicator is revoked first
  // (rrCommRevoke): operations in flight here and on the peers end at once.
  // `opts` as split()'s.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                           const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // rrCommAgreeFailed over this communicator (after a failure broke it, or
  // revoked first): the ranks every survivor agrees failed, ascending, which
  // shrink_group then excludes (ringreduce.dask.shrink_lost).
  std::vector<int> agree_on_failed(bool revoke_first);
  // The options of a group split() or shrink() makes, from torch's `opts`.
  c10::intrusive_ptr<Options> options_for_child(const c10::intrusive_ptr<c10d::Backend::Options>& opts) const;
  // What splitGroup clones for the child: this group's Options.
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;

  // False until reconfigure() made the group's communicator (a group made
  // with enable_reconfigure=True), and once it was aborted or shut down.
  bool isInitialized() override;
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  // torch's fault-tolerance contract (dist._get_reconfigure_handle,
  // dist._reconfigure; reconfigure.cpp). A handle names a rendezvous this
  // rank serves (a ringreduce unique id, in text): the same one until a
  // reconfigure used it, then a fresh one. reconfigure() ends the group's
  // communicator, if any (destroyed when idle, else aborted), and makes a new
  // one over the members of `opts.handles`: a list ranks them by position, a
  // set by the handles' order; the member first in that order serves the
  // rendezvous, so no store is needed. Every member passes the same uuid and
  // handles (checked on the new communicator; a uuid used before on this
  // group is refused). The group's rank and size become the new ones, and its
  // operations count from 0. Blocks until the communicator is made (within
  // opts.timeout, else the group's), then returns a completed Work; a failure
  // raises, naming the member, and leaves the group without a communicator
  // until the next reconfigure.
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif

  // Every backend made in this process is tracked (weakly) from its maker
  // (the binding's constructor and split()), so that shutdown_all() can end
  // them before the interpreter finalizes: ringreduce.torch calls it from
  // atexit. Otherwise a Completer thread could drop the last reference to a
  // tensor whose Python object the interpreter is tearing down, and a thread
  // that asks for the GIL then is ended by Python in the middle of a
  // destructor (std::terminate).
  static void track(const c10::intrusive_ptr<ProcessGroupRingreduce>& backend);
  static void shutdown_all();

  // Ends the communicator now (rrCommAbort): operations in flight here fail
  // at once, and the peers' fail naming this rank. torch calls it from
  // ProcessGroup.abort() (_abort_process_group, fault-tolerance libraries).
  // On a group without a communicator (enable_reconfigure) the one a
  // reconfigure is making is aborted as soon as it is made; a later
  // reconfigure makes the next.
  void abort() override;
  // What destroy_process_group calls: with nothing in flight, the
  // communicator is destroyed in order (rrCommDestroy); with operations still
  // in flight (a peer that died, a collective the peers never joined) it is
  // aborted instead, so that shutdown returns at once and they fail. Then
  // waits for every Work to end. Later operations raise. In a process forked
  // after the group was made (a DataLoader worker, say), whose engine and
  // Completer threads stayed in the parent, it touches neither: the group is
  // closed and what it holds is left, so that the child exits without
  // waiting for threads it does not have.
  void shutdown() override;
  // rrCommGetAsyncError: rrSuccess while healthy, else what broke the
  // communicator (rrInvalidUsage once aborted).
  rrResult_t async_error();
  // rrGetLastError: the text of the communicator's last error (what broke
  // it, naming the peer), or what closed the group.
  std::string last_error();
  // async_error() in torch's terms (ProcessGroup.get_error(), which
  // fault-tolerance code reads): SUCCESS while healthy, TIMEOUT when a peer
  // did not answer in time, REMOTE_ERROR when a peer failed or left,
  // COMM_ERROR for the rest (aborted, shut down, a system error).
  c10d::ErrorType getError() override;

  // dist.set_timeout (and the deprecated _set_pg_timeout): the group's
  // timeout for the operations issued from now on; each takes it in the
  // engine (rrCommSetTimeout) unless its options set their own.
  void setTimeout(std::chrono::milliseconds timeout) override;
  // The group's timeout now.
  std::chrono::milliseconds group_timeout();

  // Tests without a GPU: from now on this group's collectives on CPU
  // tensors take the device path through `seam`, which records its calls.
  void use_fake_device_seam(std::shared_ptr<DeviceSeam> seam);
  // torch's eager connect (init_process_group(device_id=...) on a backend
  // that splits): the communicator's stream-ordered path is set up on
  // `device` now, by a barrier ordered on the group's stream there, instead
  // of at the first call on CUDA tensors.
  void eagerConnectSingleDevice(at::Device device) override;

  // The group's collective count, which torch's debug wrapper
  // (TORCH_DISTRIBUTED_DEBUG=DETAIL) compares across ranks before each call.
  // Point-to-point calls do not count: they are not matched across ranks.
  // It starts at 0 on every rank, so there is nothing to set: torch 2.15 made
  // the setter a no-op, and older torch calls it right after init.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return sequence_; }

  // Every Work is timed (work.hpp): there is nothing to turn on.
  void enableCollectivesTiming() override {}
#ifdef C10D_BACKEND_HAS_HOOKS
  // torch's flight recorder (and anyone else) hears of each Work that
  // completed successfully, with its duration, and of a timeout or a failed
  // peer before the caller does (hooks.hpp).
  bool supportsCompletionHooks() const override { return true; }
  void registerCompletionHook(int64_t id, c10d::CompletionHook hook) override {
    hooks_->add_completion(id, std::move(hook));
  }
  void unregisterCompletionHook(int64_t id) override { hooks_->remove_completion(id); }
  bool supportsAbortHooks() const override { return true; }
  void registerAbortHook(int64_t id, c10d::AbortHook hook) override { hooks_->add_abort(id, std::move(hook)); }
  void unregisterAbortHook(int64_t id) override { hooks_->remove_abort(id); }
#endif

  // torch's coalescing (batch_isend_irecv, _coalescing_manager with a
  // device): every Work issued between the two calls, on any thread, is
  // collected, and endCoalescing returns them as one (CoalescedWork, already
  // complete when there were none). Sends and receives are posted at once
  // and never wait for each other; the collectives torch coalesces reach the
  // backend as one call (allreduce_coalesced, the coalesced tensor forms).
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
#ifdef RR_TORCH_HAS_GATHER_SINGLE
  // dist.gather_single (torch 2.15; python/meson.build looks for it in the
  // headers): every rank's input into the root's one contiguous output of
  // group size x input elements.
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // dist.monitored_barrier: Gloo's protocol and messages, naming on rank 0
  // the ranks that did not arrive within opts.timeout (the group's when
  // unset); monitored_barrier.cpp.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

 private:
  // One engine call: `issue` makes it (engine_call.hpp: the ...Async form
  // that writes the request for CPU tensors; the stream-ordered form for
  // CUDA ones, device_collective), under the issue lock so that the
  // Completer's line is the engine's order. A failed issue throws here, with
  // the engine's text.
  // `opts` are the operation's: its timeout (kUnsetTimeout: the group's),
  // and asyncOp, false for a call torch waits for at once (dist.all_reduce
  // without async_op): that one is waited for on the caller's thread, where
  // the engine runs it when its communicator is idle, and the Work comes
  // back completed, without a hop to the engine's or the Completer's thread.
  // `profile` names it in torch.profiler traces ("ringreduce:all_reduce"),
  // with `inputs`' shapes.
  template <typename Opts, typename Issue>
  c10::intrusive_ptr<c10d::Work> collective(c10d::OpType type, const Opts& opts, const char* op_name,
                                            const char* profile, const std::vector<at::Tensor>& inputs,
                                            std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                                            std::function<void()> on_success, Issue&& issue);
  // The same for CUDA tensors on `device` (device_seam.hpp says which calls
  // it makes, in order): the engine call is ordered on the group's stream
  // there after torch's current one, `on_success` (copies back) is enqueued
  // after it on that stream, and the DeviceWork holds an event recorded
  // after both. Nothing waits on the host.
  template <typename Opts, typename Issue>
  c10::intrusive_ptr<c10d::Work> device_collective(c10d::OpType type, const Opts& opts, const char* op_name,
                                                   const char* profile, const std::vector<at::Tensor>& inputs,
                                                   std::vector<at::Tensor> outputs,
                                                   std::vector<at::Tensor> keep_alive,
                                                   const std::function<void()>& on_success, Issue&& issue,
                                                   c10::Device device);
  // The device of a call's tensors (the caller's and those the engine reads
  // or writes) when they are CUDA tensors, all on one device; nullopt for
  // CPU tensors. Throws naming the operation when they mix devices. With the
  // fake seam, CPU tensors take the device path.
  std::optional<c10::Device> device_of(const char* op_name,
                                       std::initializer_list<const std::vector<at::Tensor>*> lists) const;
  // True when `tensor` takes the device path (a CUDA tensor, or any with the
  // fake seam): for the operations that must refuse it or choose another
  // engine call there.
  bool on_device(const at::Tensor& tensor) const { return tensor.is_cuda() || fake_device_; }
  // Throws unless `tensor` takes the host path: send and recv (user calls;
  // monitoredBarrier's own bytes are host tensors) refuse device tensors.
  void check_host_tensor(const char* op_name, const at::Tensor& tensor) const;
  // The group's stream on `device` (the seam's side stream, made at the
  // first call there). With the issue lock held.
  void* side_stream_locked(c10::Device device);
  // A DeviceWork's view of the communicator's failure: the group is held
  // weakly, as the Work may outlive it.
  DeviceWork::Failure device_failure(const char* op_name);
  // The communicator's async error and its text once it broke, or the
  // group was aborted; nothing while healthy, after an orderly shutdown
  // (the communicator ran its calls to their end), or while another thread
  // holds the issue lock (asked again later: it never waits).
  std::optional<std::pair<rrResult_t, std::string>> stream_failure();

  // The engine call of `work`, with the issue lock held, under `timeout`
  // (an operation's opts.timeout; kUnsetTimeout: the group's), which travels
  // in the call's config. The Completer ends it, unless `here`: then the
  // caller runs it to its end (run_here) once it let go of the lock.
  template <typename Issue>
  void issue_locked(const c10::intrusive_ptr<CollectiveWork>& work, const char* op_name,
                    std::chrono::milliseconds timeout, Issue&& issue, bool here = false);
  // Waits for `work`'s engine call on this thread and completes the Work.
  void run_here(const c10::intrusive_ptr<CollectiveWork>& work);
  // The call's own config for `timeout` (kUnsetTimeout: the group's; an
  // operation's timeout travels with its engine call, so another thread's
  // never becomes its). Throws naming the operation for a timeout below
  // 1 ms. With the issue lock held.
  rrCollConfig_t call_config_locked(const char* op_name, std::chrono::milliseconds timeout) const;
  // Hands the engine `timeout` (kUnsetTimeout: the group's) for the calls
  // made next, unless it has it: for sends and receives, whose engine calls
  // take no config. With the issue lock held.
  void use_timeout_locked(const char* op_name, std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> point_to_point(c10d::OpType type, const char* op_name, at::Tensor& tensor,
                                                int peer, int tag);
  // The issue lock, once no sparse all-reduce is between its two engine
  // calls (issue_paused_): every collective and split takes it so, keeping
  // the engine's order the same on every rank.
  std::unique_lock<std::mutex> lock_issue();
  // dist.all_reduce of a sparse COO tensor (sparse_allreduce.cpp): SUM only,
  // the result coalesced and copied into the input, as Gloo's.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts);
  void check_open(const char* op_name) const;
  // One byte to or from `peer` for monitoredBarrier; a receive an earlier
  // monitored barrier left in flight is reused. With monitored_mutex_ held.
  c10::intrusive_ptr<c10d::Work> monitored_byte(c10d::OpType type, int peer, int tag);
  // True while a send or receive has not ended.
  bool p2p_pending();

  // The communicator's state: open, then aborted or shut down (destroyed, or
  // aborted by shutdown); a group made for reconfigure starts without one,
  // and is so again while reconfigure makes the next. Guarded by
  // issue_mutex_.
  enum class State { kUnconfigured, kOpen, kAborted, kShutDown };

  // Ends the communicator, if the group is open (destroyed when nothing is
  // in flight, else aborted, so that this returns at once), runs every Work
  // already issued to its end, and leaves the group in state `next`: what
  // shutdown() and reconfigure() share. Without the GIL.
  void end_communicator(State next);

  rrComm_t comm_ = nullptr;
  // The device path's CUDA calls: the CUDA seam (nullptr in a build without
  // CUDA support), or a fake the tests put in (use_fake_device_seam).
  std::shared_ptr<DeviceSeam> seam_ = cuda_seam();
  bool fake_device_ = false;
  // The side stream of each device this group's calls used, by device index.
  // Guarded by issue_mutex_.
  std::map<int, void*> side_streams_;
  // What the group was made with.
  const c10::intrusive_ptr<Options> options_;
  // The group's timeout: options_'s until setTimeout (dist.set_timeout)
  // changes it. Each operation's deadline in the engine unless its options
  // set their own (opts.timeout), and monitoredBarrier's when the call sets
  // none. Guarded by issue_mutex_.
  std::chrono::milliseconds timeout_;
  // What the engine was last told (rrCommSetTimeout): each engine call takes
  // the value in force when it is made. Guarded by issue_mutex_.
  std::chrono::milliseconds engine_timeout_;
  // The process that made the group (and its threads).
  const pid_t owner_ = getpid();
  State state_ = State::kOpen;
  std::atomic<uint64_t> sequence_{0};
  // Shared with every Work, which may outlive the group.
  const std::shared_ptr<Hooks> hooks_ = std::make_shared<Hooks>();
  std::mutex issue_mutex_;
  // Set while a sparse all-reduce waits, without the issue lock, for the
  // sizes that its second call needs; issue_resumed_ tells when it clears.
  bool issue_paused_ = false;
  std::condition_variable issue_resumed_;
  // Between startCoalescing and endCoalescing: the Works issued. Guarded by
  // issue_mutex_.
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  std::unique_ptr<Completer> completer_;
  // Collectives issued and being waited for on their caller's thread
  // (run_here), not in the Completer's line. Guarded by issue_mutex_.
  int running_here_ = 0;
  std::mutex p2p_mutex_;
  std::vector<std::shared_ptr<PointToPoint>> p2p_in_flight_;
  // One monitoredBarrier at a time; the receives earlier ones left in
  // flight, by peer.
  std::mutex monitored_mutex_;
  std::map<int, c10::intrusive_ptr<c10d::Work>> monitored_held_;
  // The splitGroup (group name and description) that last left this rank
  // out, asked again for its next device type (split()). Guarded by
  // issue_mutex_.
  std::string left_out_of_;
  // get_reconfigure_handle()'s handle, until a reconfigure spent its
  // rendezvous (empty: none made yet), and the uuids reconfigure took.
  // Guarded by reconfigure_mutex_, which one reconfigure holds throughout.
  mutable std::mutex reconfigure_mutex_;
  mutable std::string handle_;
  std::set<int64_t> used_uuids_;
};

// Defined here: the coalesced forms (coalesced.cpp) issue through it too.
template <typename Opts, typename Issue>
c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::collective(c10d::OpType type, const Opts& opts,
                                                                  const char* op_name, const char* profile,
                                                                  const std::vector<at::Tensor>& inputs,
                                                                  std::vector<at::Tensor> outputs,
                                                                  std::vector<at::Tensor> keep_alive,
                                                                  std::function<void()> on_success, Issue&& issue) {
  if (const std::optional<c10::Device> device = device_of(op_name, {&inputs, &outputs, &keep_alive})) {
    return device_collective(type, opts, op_name, profile, inputs, std::move(outputs), std::move(keep_alive),
                             on_success, std::forward<Issue>(issue), *device);
  }
  auto work = c10::make_intrusive<CollectiveWork>(rank_, type, op_name, profile, inputs, std::move(outputs),
                                                  std::move(keep_alive), std::move(on_success), hooks_);
  bool here = false;
  {
    std::unique_lock<std::mutex> lock = lock_issue();
    // Inside torch's coalescing the Works are waited for together, later.
    here = !opts.asyncOp && !coalescing_;
    issue_locked(work, op_name, opts.timeout, std::forward<Issue>(issue), here);
  }
  if (here) run_here(work);
  return work;
}

template <typename Issue>
void ProcessGroupRingreduce::issue_locked(const c10::intrusive_ptr<CollectiveWork>& work, const char* op_name,
                                          std::chrono::milliseconds timeout, Issue&& issue, bool here) {
  check_open(op_name);
  const rrCollConfig_t config = call_config_locked(op_name, timeout);
  rrRequest_t request = nullptr;
  check_result(issue(EngineCall::queued(comm_, &config, &request)), op_name);
  ++sequence_;
  work->set_request(request);
  if (here) {
    ++running_here_;
  } else {
    completer_->add(work);
  }
  if (coalescing_) coalesced_.push_back(work);
}

template <typename Opts, typename Issue>
c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::device_collective(
    c10d::OpType type, const Opts& opts, const char* op_name, const char* profile,
    const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
    const std::function<void()>& on_success, Issue&& issue, c10::Device device) {
  std::unique_lock<std::mutex> lock = lock_issue();
  check_open(op_name);
  DeviceSeam& seam = *seam_;
  void* current = seam.current_stream(device);
  if (seam.capturing(current)) throw capture_refused(op_name);
  void* side = side_stream_locked(device);
  seam.stream_wait(side, seam.record_event(device, current));  // the inputs are ready on `current`
  for (const at::Tensor& t : keep_alive) seam.record_stream(t, side);
  const rrCollConfig_t config = call_config_locked(op_name, opts.timeout);
  check_result(seam.enqueue(device, side, [&](void* on) { return issue(EngineCall::on_stream(comm_, &config, on)); }),
               op_name);
  ++sequence_;
  DeviceSeam::Event event;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  seam.run_on(device, side, [&] {
    if (on_success) on_success();  // the copies back, after the call on the side stream
    event = seam.record_event(device, side);
    future = seam.completed_future(device, outputs);
  });
  auto work = c10::make_intrusive<DeviceWork>(rank_, type, op_name, profile, inputs, std::move(outputs),
                                              std::move(keep_alive), device, seam_, std::move(event),
                                              std::move(future), device_failure(op_name));
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

}  // namespace ringreduce_torch
