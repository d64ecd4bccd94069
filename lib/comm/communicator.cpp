#include "comm/communicator.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algo/pipeline.hpp"
#include "algo/ring.hpp"
#include "algo/tree.hpp"
#include "comm/idle_progress.hpp"
#include "common/log.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"
#include "reduce/reduce.hpp"
#if RR_HAVE_CUDA
#include "comm/stream_order.hpp"
#endif

namespace rr {

namespace {
// The ring's tag has 24 bits of column number: no schedule may need more.
constexpr size_t kMaxColumns = size_t{1} << 24;
constexpr int kMaxRanks = 1 << 15;
}  // namespace

Communicator::Communicator(int rank, int size, Settings settings,
                           std::unique_ptr<transport::Transport> transport, std::shared_ptr<void> keepalive)
    : rank_(rank),
      size_(size),
      settings_(std::move(settings)),
      transport_(std::move(transport)),
      keepalive_(std::move(keepalive)),
      timeout_ms_(settings_.timeout_ms) {}

Communicator::~Communicator() {
  idle_progress::remove(this);
  // Queued operations finish (or time out) before their transport goes.
  queue_.stop();
  // No call runs any more: a peer that leaves from here on (it destroyed
  // its communicator first) is no failure of this one.
  if (transport_) transport_->begin_close();
  // After a failure or an abort the transport is left as it is, unprogressed
  // (transport/ucx: tearing down endpoints to lost peers crashes UCX), so
  // its posted receives are not retired either: progressing it here is what
  // let UCX's TCP lane trip its assertions on a peer's reset connection.
  if (control_ && !expects_peer_loss_) control_->close(std::chrono::milliseconds(100));
  // The transport goes first: closing it may still complete requests into the
  // executor's completions and the pool's slots, which must outlive it.
  transport_.reset();
  // Its staging slots are registered with the transport, like the pool's.
  stream_order_.reset();
  control_.reset();
  one_shot_.reset();
  board_exec_.reset();
  board_.reset();
  ring_.reset();
  chain_.reset();
  batch_.reset();
  group_.reset();
}

Status Communicator::init() {
  // The ring's tag carries the step in 16 bits, and a ring of N has 2(N-1) steps.
  if (size_ > kMaxRanks) {
    return InvalidArgument("nranks=" + std::to_string(size_) + ": at most " + std::to_string(kMaxRanks) +
                           " ranks are supported");
  }
  batch_ = std::make_unique<exec::Batch>(transport_.get());
  batch_->reserve(2 * static_cast<size_t>(size_));
  counts_out_.assign(2 * static_cast<size_t>(size_), 0);
  counts_in_.assign(2 * static_cast<size_t>(size_), 0);
  group_ = std::make_unique<exec::Batch>(transport_.get());
  if (size_ > 1) {
    control_ = std::make_unique<ControlChannel>(transport_.get());
    RR_RETURN_IF_ERROR(control_->start());
  }
  choose_ring_order();
  // The depth first (it may time the links to the ring's neighbours): the
  // staging pool and the executors are made for it.
  RR_RETURN_IF_ERROR(size_pipeline());
  if (size_ > 1) {
    // Two staging slots per column in flight: one being reduced, one receiving.
    RR_RETURN_IF_ERROR(pool_.reserve(settings_.chunk_bytes, 2 * static_cast<size_t>(settings_.pipeline_depth)));
    RR_RETURN_IF_ERROR(transport_->register_memory(pool_.data(), pool_.bytes()));
  }
  ring_ = std::make_unique<exec::RingExecutor>(transport_.get(), &pool_, settings_.pipeline_depth, size_);
  chain_ = std::make_unique<exec::ChainExecutor>(transport_.get(), &pool_, settings_.pipeline_depth, size_, rank_);
  recursive_doubling_ =
      std::make_unique<coll::RecursiveDoubling>(transport_.get(), &pool_, rank_, size_, settings_.check_arguments);
  halving_doubling_ = std::make_unique<coll::HalvingDoubling>(transport_.get(), &pool_, rank_, size_);
  tree_ = std::make_unique<coll::BinomialTree>(transport_.get(), &pool_, rank_, size_);
  if (rank_ == 0) {
    RR_LOG(LogLevel::kInfo,
           "rank 0 of %d: chunk_bytes=%zu (%s) pipeline_depth=%d (%s) timeout_ms=%d (%s) check_arguments=%d (%s), "
           "staging %zu bytes, gpu_segment_bytes=%zu (%s) gpu_reduce=%s (%s)",
           size_, settings_.chunk_bytes, settings_.chunk_bytes_source.text().c_str(), settings_.pipeline_depth,
           settings_.pipeline_depth_source.text().c_str(), settings_.timeout_ms, settings_.timeout_ms_source.text().c_str(),
           settings_.check_arguments ? 1 : 0, settings_.check_arguments_source.text().c_str(), pool_.bytes(),
           settings_.gpu_segment_bytes, settings_.gpu_segment_bytes_source.text().c_str(),
           settings_.gpu_reduce_on_device ? "device" : "host", settings_.gpu_reduce_source.text().c_str());
  }
  RR_RETURN_IF_ERROR(setup_same_host_path());
  // How ranks wait (exec/wait_policy.hpp): yield the core while this host's
  // ranks outnumber the CPUs they may use together, unless RR_WAIT_POLICY says.
  exec::note_host_ranks(transport_->same_host_ranks(), host_cpus_);
  if (rank_ == 0) {
    RR_LOG(LogLevel::kInfo, "rank 0: wait policy %s (RR_WAIT_POLICY=%s; %d ranks on this host, %d CPUs %s)",
           exec::wait_mode_name(exec::effective_wait_mode()), exec::wait_mode_name(exec::wait_mode()),
           transport_->same_host_ranks(), host_cpus_ > 0 ? host_cpus_ : exec::usable_cores(),
           host_cpus_ > 0 ? "for them together" : "for this rank");
  }
  return Status::Ok();
}

void Communicator::progress_while_idle(int* fd, bool* pending) {
  *fd = -1;
  *pending = false;
  if (aborting() || expects_peer_loss_ || !broken_.ok()) return;
  // Bounded: a transport that is never quiet still hands the turn back.
  constexpr int kMaxRounds = 64;
  for (int i = 0; i < kMaxRounds && transport_->progress_between_calls(); ++i) {
  }
  switch (transport_->arm_events()) {
    case transport::Transport::Arm::kArmed:
      *fd = transport_->event_fd();
      break;
    case transport::Transport::Arm::kBusy:
      *pending = true;
      break;
    case transport::Transport::Arm::kNoEvents:
      break;
  }
}

Status Communicator::enqueue_on_stream(const char* call, void* stream, int device,
                                       const std::function<StagedCollectives::Plan(const StagedCollectives& staged)>& make,
                                       std::function<Status()>* until_done, const CallSettings& own) {
#if RR_HAVE_CUDA
  StreamOrder* order = nullptr;
  {
    std::lock_guard<std::mutex> lock(stream_order_mutex_);
    if (!stream_order_) {
      // The device is the caller's: read it here, since the queue may run
      // the setup on its own thread, whose current device is 0.
      int bound = device;
      if (bound < 0) {
        RR_RETURN_IF_ERROR(memory::cuda_status(cudaGetDevice(&bound), std::string(call) + ": cudaGetDevice"));
      }
      // Made on the queue: it registers memory with the transport, which
      // only one thread at a time may use.
      std::unique_ptr<StreamOrder> order_made;
      Status made = queue_.run([&] { return StreamOrder::create(this, bound, &order_made); });
      if (!made.ok()) return Status(made.code(), std::string(call) + ": setting up stream-ordered calls: " + made.message());
      stream_order_.reset(order_made.release());
    }
    order = stream_order_.get();
  }
  if (device >= 0 && device != order->device()) {
    return InvalidArgument(std::string(call) + ": the buffers are on device " + std::to_string(device) +
                           ", but this communicator's stream-ordered calls use device " +
                           std::to_string(order->device()) + " (one GPU per communicator)");
  }
  return order->submit(call, stream, make, until_done, own);
#else
  (void)stream, (void)device, (void)make, (void)until_done, (void)own;
  return InvalidUsage(std::string(call) + ": stream is not NULL, but stream-ordered calls need the CUDA build of ringreduce");
#endif
}

void StreamOrderDeleter::operator()(StreamOrder* order) const {
#if RR_HAVE_CUDA
  delete order;
#else
  (void)order;  // never made without CUDA
#endif
}

void Communicator::report_async_failure(const Status& failure) {
  if (failure.ok()) return;
  if (failure.code() == Code::kCudaError) {
    (void)fail_operation(failure);  // tells the peers, and the communicator is broken
  } else {
    int expected = rrSuccess;
    async_error_.compare_exchange_strong(expected, to_result(failure.code()), std::memory_order_relaxed);
  }
  set_last_error(failure.message());
}

Status Communicator::check() {
  if (aborting()) return InvalidUsage("the communicator was aborted (rrCommAbort)");
  if (setup_watch_) RR_RETURN_IF_ERROR(setup_watch_->check());
  if (revoked_.ok() && revoke_requested_.load(std::memory_order_relaxed)) {
    revoked_ = Status(Code::kRevoked, "the communicator was revoked (rrCommRevoke on rank " + std::to_string(rank_) + ")");
  }
  // The first notice a peer sends stays: a revocation, or the failure that
  // made it give up. Later ones are left for gather_timeouts() (what the
  // other ranks that timed out waited on): a survivor of a failure revokes
  // its own communicator (the ULFM idiom) rather than waiting to hear.
  wire::Notice notice;
  if (remote_.ok() && revoked_.ok() && control_ && control_->poll(&notice)) {
    const std::string said = "rank " + std::to_string(notice.origin) + " reported: " + notice.text;
    if (notice.kind == wire::NoticeKind::kRevoked) {
      revoked_ = Status(Code::kRevoked, said);
    } else {
      // A mismatch is the caller's bug wherever it was found: the same code on every rank.
      const Code code = notice.kind == wire::NoticeKind::kMismatch ? Code::kInvalidUsage : Code::kRemoteError;
      remote_ = Status(code, said);
      heard_timeout_ = notice.kind == wire::NoticeKind::kTimedOut;
      remote_origin_ = notice.origin;
    }
  }
  const Status& cause = !revoked_.ok() ? revoked_ : remote_;
  if (!cause.ok()) {
    int expected = rrSuccess;  // the first failure stays the communicator's
    async_error_.compare_exchange_strong(expected, to_result(cause.code()), std::memory_order_relaxed);
  }
  return cause;
}

Status Communicator::finish_revoke() {
  (void)check();  // revoked_ says so from here on
  if (!revocation_told_ && control_ && !aborting()) {
    revocation_told_ = true;
    tell_everyone(wire::NoticeKind::kRevoked, "rank " + std::to_string(rank_) + " revoked the communicator (rrCommRevoke)");
  }
  expect_peer_loss();
  if (broken_.ok()) broken_ = revoked_;
  return Status::Ok();
}

Status Communicator::fail_operation(Status failure, wire::NoticeKind kind) {
  if (failure.ok()) return failure;
  expect_peer_loss();  // peers that failed too may now leave at any moment
  if (failure.code() == Code::kRemoteError && remote_.ok() && control_ && !aborting()) {
    // A peer that vanished may have left because of a notice that is still
    // on its way here (it heard first, and exited): the notice says why.
    const auto until = exec::Clock::now() + std::chrono::milliseconds(100);
    while (remote_.ok() && exec::Clock::now() < until) {
      if (!transport_->progress()) transport_->wait_for_events(5);
      (void)check();
    }
    if (!remote_.ok()) failure = Status(remote_.code(), remote_.message() + " (here: " + failure.message() + ")");
  }
  int expected = rrSuccess;
  async_error_.compare_exchange_strong(expected, to_result(failure.code()), std::memory_order_relaxed);
  // Even a rank that failed because of a notice tells the others what it
  // waited on: that is how a rank which timed out first learns who hung.
  if (control_ && !aborting()) {
    const wire::NoticeKind told = failure.code() == Code::kInvalidUsage ? wire::NoticeKind::kMismatch
                                  : failure.code() == Code::kTimeout   ? wire::NoticeKind::kTimedOut
                                  : failure.code() == Code::kRevoked   ? wire::NoticeKind::kRevoked
                                                                       : kind;
    // A revocation goes on to every rank from each that hears of it (a
    // peer the revoking rank could not reach still learns of it).
    if (told == wire::NoticeKind::kRevoked) revocation_told_ = true;
    tell_everyone(told, failure.message());
    // A rank that timed out, or failed on hearing that one did, may be
    // blaming a healthy neighbour: hear what the others waited on.
    if (failure.code() == Code::kTimeout || heard_timeout_) failure = gather_timeouts(failure);
  }
  if (broken_.ok()) broken_ = failure;
  return failure;
}

Status Communicator::gather_timeouts(const Status& timeout) {
  // A hung rank stalls the whole ring, and every rank's deadline, counted
  // from the same call, passes at about the same moment: each would blame
  // the (healthy) neighbour it waited on. So each rank tells the others what
  // it waited on (above) and listens a little for theirs: the stuck rank is
  // the one that those next to it name and that says nothing itself.
  // Long enough for a rank still draining its sends (exec::kDrainLimit) to
  // speak, and short enough that the timeout is reported within 0.5 s of
  // RR_TIMEOUT_MS (drain, notice and this together).
  const auto grace = std::chrono::milliseconds(std::min<int64_t>(200, std::max<int64_t>(50, current_timeout().count() / 2)));
  const auto until = exec::Clock::now() + grace;
  std::string others;
  std::vector<bool> heard(static_cast<size_t>(size_), false);
  while (exec::Clock::now() < until) {
    const bool moved = transport_->progress();
    wire::Notice notice;
    while (control_->poll(&notice)) {
      if (heard[static_cast<size_t>(notice.origin)]) continue;
      heard[static_cast<size_t>(notice.origin)] = true;
      others += "; rank " + std::to_string(notice.origin) + " reported: " + notice.text;
    }
    if (!moved) transport_->wait_for_events(5);
  }
  if (heard_timeout_) heard[static_cast<size_t>(remote_origin_)] = true;
  if (others.empty()) return timeout;
  std::string silent;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !heard[static_cast<size_t>(r)]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
  }
  return Timeout(timeout.message() + others + (silent.empty() ? "" : "; silent: rank " + silent));
}

void Communicator::dump() {
  bool running = false;
  size_t queued = 0;
  queue_.snapshot(&running, &queued);
  const int error = async_error_.load(std::memory_order_relaxed);
  std::string state = error == rrSuccess ? "healthy" : "broken: " + last_error();
  RR_LOG(LogLevel::kWarn, "dump: rank %d of %d: %llu collectives issued, %s, %zu queued; %s%s", rank_, size_,
         static_cast<unsigned long long>(sequence_.load(std::memory_order_relaxed)),
         running ? "one running" : "none running", queued, aborting() ? "aborting; " : "", state.c_str());
  if (running) dump_requested_.store(true, std::memory_order_relaxed);
}

void Communicator::finish_abort() {
  request_abort();
  expect_peer_loss();
  if (!control_ || !remote_.ok()) return;
  tell_everyone(wire::NoticeKind::kAborted, "rank " + std::to_string(rank_) + " aborted the communicator (rrCommAbort)");
}

void Communicator::tell_everyone(wire::NoticeKind kind, std::string text) {
  wire::Notice notice;
  notice.kind = kind;
  notice.sequence = static_cast<uint32_t>(sequence_);
  notice.origin = rank_;
  notice.text = std::move(text);
  control_->tell_everyone(notice, std::chrono::milliseconds(100));
}

exec::Call Communicator::issue(exec::Collective collective, const void* send, void* recv, size_t count,
                               rrDataType_t dtype, rrRedOp_t op, int root) {
  exec::Call call;
  call.collective = collective;
  call.sequence = sequence_++;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.root = root;
  call.timeout = current_timeout();
  call.interrupt = this;
  call.order = ring_order_.empty() ? nullptr : ring_order_.data();
  return call;
}

Status Communicator::agree(const exec::Call& call, const wire::RingShape& shape) {
  if (size_ == 1) return Status::Ok();
  const wire::OpHeader mine = wire::header_of(call, shape);
  // On one host, on the board (comm/one_shot.cpp), whatever
  // RR_CHECK_ARGUMENTS says: every rank makes the same publications.
  if (board_exec_) return agree_on_board(call, mine);
  if (!settings_.check_arguments) return Status::Ok();
  wire::encode_header(mine, header_out_);
  const int left = (rank_ + size_ - 1) % size_;
  const int right = (rank_ + 1) % size_;
  const uint64_t tag = exec::collective_tag(call.sequence, exec::kHeaderStep, 0);
  batch_->add_recv(left, tag, header_left_, sizeof(header_left_));
  if (right != left) batch_->add_recv(right, tag, header_right_, sizeof(header_right_));
  batch_->add_send(right, tag, header_out_, sizeof(header_out_));
  if (right != left) batch_->add_send(left, tag, header_out_, sizeof(header_out_));
  // The name is for errors only; a constant keeps the data path free of allocation.
  static const std::string kName = "argument check";
  Status exchanged = batch_->run(kName, deadline(), this);
  batch_->clear();
  if (!exchanged.ok()) return fail_operation(Status(exchanged.code(), mine.describe() + ": " + exchanged.message()));
  for (int peer : {left, right}) {
    wire::OpHeader theirs;
    Status parsed = wire::decode_header(peer == left ? header_left_ : header_right_, sizeof(header_left_), &theirs);
    if (!parsed.ok()) {
      return fail_operation(RemoteError(mine.describe() + ": rank " + std::to_string(peer) + " sent " +
                                        parsed.message()));
    }
    if (theirs != mine) return disagreement(mine, theirs, peer);
  }
  return Status::Ok();
}

Status Communicator::disagreement(const wire::OpHeader& mine, const wire::OpHeader& theirs, int peer) {
  return fail_operation(wire::disagreement(mine, theirs, rank_, peer), wire::NoticeKind::kMismatch);
}

Status Communicator::check_usable() {
  if (aborting()) return InvalidUsage("the communicator was aborted (rrCommAbort)");
  Status heard = check();
  if (heard.code() == Code::kRevoked) return heard;  // every call on a revoked communicator says so
  if (broken_.ok() && !heard.ok()) broken_ = heard;
  if (!broken_.ok()) {
    return InvalidUsage("communicator is unusable after an earlier failure (" + broken_.message() +
                        "); destroy it and make a new one");
  }
  return Status::Ok();
}

Status Communicator::ring_shape(const exec::Call& call, size_t count, bool staged, wire::RingShape* shape) const {
  const size_t elem_bytes = reduce::dtype_size(call.dtype);
  const size_t largest_segment = (count + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_);
  // The ring's tag holds 24 bits of chunk column: chunks of `bytes` must cut
  // the largest segment into fewer; *elems is how many elements one holds.
  auto chunks_fit = [&](size_t bytes, const char* knob, size_t* elems) {
    *elems = std::max<size_t>(1, bytes / elem_bytes);
    if (largest_segment / *elems < kMaxColumns) return Status::Ok();
    return InvalidArgument(std::string(exec::collective_name(call.collective)) + ": " + std::to_string(count) +
                           " elements need more than 2^24 chunks of " + std::to_string(bytes) + " bytes; raise " +
                           knob);
  };
  size_t chunk_elems = 0;
  RR_RETURN_IF_ERROR(chunks_fit(settings_.chunk_bytes, "RR_CHUNK_BYTES", &chunk_elems));
  *shape = wire::RingShape();
  // Host memory between ranks of one host moves through the slot rings, a
  // slot per chunk; the staged (device) path keeps the transport's ring.
  if (shm_ring_ && !staged) {
    RR_RETURN_IF_ERROR(chunks_fit(shm_ring_->chunk_bytes(), "RR_SHM_SLOT_BYTES", &chunk_elems));
  } else {
    // Full waves (never past the tag's 2^24 columns: then the chunk stays).
    const size_t balanced = algo::balanced_chunk_elems(largest_segment, chunk_elems, settings_.pipeline_depth);
    if (largest_segment / balanced < kMaxColumns) chunk_elems = balanced;
    shape->depth = static_cast<uint8_t>(settings_.pipeline_depth);
  }
  // The cut, not the setting: ranks whose settings differ but cut alike
  // (a segment of one chunk) agree. A chunk holds at most 2^30 bytes
  // (Settings::kMaxChunkBytes): its elements fit 32 bits.
  shape->chunk_elems = static_cast<uint32_t>(std::min(chunk_elems, largest_segment));
  return Status::Ok();
}

Status Communicator::run_ring(exec::Call& call, size_t count, int shift, algo::RingPhases phases,
                              const wire::RingShape& shape) {
  algo::RingSchedule schedule(size_, rank_, count, shape.chunk_elems, shift, phases, call.order);
  // On failure peers may be mid-operation: this ring is no longer in step.
  if (shm_ring_ && call.reducer == nullptr) {
    call.schedule = algo::Schedule::kSameHostRing;
    return fail_operation(shm_ring_->run(schedule, call));
  }
  call.schedule = algo::Schedule::kRing;
  return fail_operation(ring_->run(schedule, call));
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op,
                               exec::Reducer* reducer, const void* reduce_source) {
  RR_RETURN_IF_ERROR(check_usable());
  if (count == 0) return Status::Ok();
  if (size_ == 1) {
    // One rank: the result is the input (avg over one rank divides by one).
    reduce::finish(recv, send, count, dtype, op, 1);
    return Status::Ok();
  }
  const algo::AllreduceAlgo chosen = allreduce_algo(count * reduce::dtype_size(dtype), reducer != nullptr);
  exec::Call call = issue(exec::Collective::kAllReduce, send, recv, count, dtype, op);
  call.reducer = reducer;
  call.reduce_source = reduce_source;
  // The one-shot's publications and recursive doubling's messages carry the
  // argument check: no round trip before the data.
  if (chosen == algo::AllreduceAlgo::kOneShot) return allreduce_one_shot(call, wire::header_of(call));
  if (chosen == algo::AllreduceAlgo::kRecursiveDoubling) return allreduce_recursive_doubling(call, wire::header_of(call));
  if (chosen == algo::AllreduceAlgo::kHalvingDoubling) {
    RR_RETURN_IF_ERROR(agree(call));
    call.schedule = algo::Schedule::kHalvingDoubling;
    halving_doubling_->prepare(call);
    return run(*halving_doubling_, call);
  }
  wire::RingShape shape;
  RR_RETURN_IF_ERROR(ring_shape(call, count, reducer != nullptr, &shape));
  RR_RETURN_IF_ERROR(agree(call, shape));
  return run_ring(call, count, 0, algo::RingPhases::kBoth, shape);
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recvcount, rrDataType_t dtype,
                                    rrRedOp_t op) {
  RR_RETURN_IF_ERROR(check_usable());
  if (recvcount == 0) return Status::Ok();
  if (size_ == 1) {
    reduce::finish(recv, send, recvcount, dtype, op, 1);
    return Status::Ok();
  }
  // Every segment is recvcount long; shift -1 leaves rank r owning segment r.
  const size_t count = recvcount * static_cast<size_t>(size_);
  exec::Call call = issue(exec::Collective::kReduceScatter, send, recv, recvcount, dtype, op);
  wire::RingShape shape;
  RR_RETURN_IF_ERROR(ring_shape(call, count, false, &shape));
  RR_RETURN_IF_ERROR(agree(call, shape));
  return run_ring(call, count, -1, algo::RingPhases::kReduceScatter, shape);
}

Status Communicator::all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype) {
  RR_RETURN_IF_ERROR(check_usable());
  if (sendcount == 0) return Status::Ok();
  const size_t bytes = sendcount * reduce::dtype_size(dtype);
  // This rank's own block is a local copy (none when in place).
  uint8_t* own = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank_) * bytes;
  if (own != send) std::memcpy(own, send, bytes);
  if (size_ == 1) return Status::Ok();
  const size_t count = sendcount * static_cast<size_t>(size_);
  exec::Call call = issue(exec::Collective::kAllGather, send, recv, sendcount, dtype);
  wire::RingShape shape;
  RR_RETURN_IF_ERROR(ring_shape(call, count, false, &shape));
  RR_RETURN_IF_ERROR(agree(call, shape));
  return run_ring(call, count, -1, algo::RingPhases::kAllGather, shape);
}

Status Communicator::run_batch(exec::Batch& batch, const std::string& name, exec::Clock::time_point until,
                               size_t* first_received) {
  Status status = batch.run(name, until, this);
  if (first_received != nullptr) *first_received = status.ok() ? batch.transfer(0).done.bytes : 0;
  batch.clear();
  return fail_operation(status);  // transfers may still be in flight, or peers out of step
}

Status Communicator::chain_shape(const exec::Call& call, wire::RingShape* shape) const {
  const size_t chunk_elems = std::max<size_t>(1, settings_.chunk_bytes / reduce::dtype_size(call.dtype));
  if (call.count / chunk_elems >= kMaxColumns) {
    return InvalidArgument(std::string(exec::collective_name(call.collective)) + ": " + std::to_string(call.count) +
                           " elements need more than 2^24 chunks of " + std::to_string(settings_.chunk_bytes) +
                           " bytes; raise RR_CHUNK_BYTES");
  }
  shape->chunk_elems = static_cast<uint32_t>(std::min(chunk_elems, call.count));  // the cut, as ring_shape()
  shape->depth = static_cast<uint8_t>(settings_.pipeline_depth);
  return Status::Ok();
}

Status Communicator::run_chain(exec::Call& call, const wire::RingShape& shape) {
  call.schedule = algo::Schedule::kChain;
  return fail_operation(chain_->run(call, shape.chunk_elems));
}

Status Communicator::broadcast(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  if (count == 0) return Status::Ok();
  if (size_ == 1) {
    if (recv != send) std::memcpy(recv, send, count * reduce::dtype_size(dtype));
    return Status::Ok();
  }
  const size_t bytes = count * reduce::dtype_size(dtype);
  const bool by_tree = broadcast_by_tree(bytes);
  exec::Call call = issue(exec::Collective::kBroadcast, send, recv, count, dtype, rrSum, root);
  wire::RingShape shape;  // the chain's; none for the tree
  if (!by_tree) RR_RETURN_IF_ERROR(chain_shape(call, &shape));
  RR_RETURN_IF_ERROR(agree(call, shape));
  if (!by_tree) return run_chain(call, shape);
  // Small: a binomial tree, log2(N) hops.
  call.schedule = algo::Schedule::kBinomialTree;
  tree_->prepare(call);
  return run(*tree_, call);
}

Status Communicator::reduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  if (count == 0) return Status::Ok();
  if (size_ == 1) {
    reduce::finish(recv, send, count, dtype, op, 1);
    return Status::Ok();
  }
  const size_t bytes = count * reduce::dtype_size(dtype);
  const bool by_tree = reduce_by_tree(bytes);
  exec::Call call = issue(exec::Collective::kReduce, send, recv, count, dtype, op, root);
  wire::RingShape shape;  // the chain's; none for the tree
  if (!by_tree) RR_RETURN_IF_ERROR(chain_shape(call, &shape));
  RR_RETURN_IF_ERROR(agree(call, shape));
  if (!by_tree) return run_chain(call, shape);
  // Small: a binomial tree, log2(N) hops.
  call.schedule = algo::Schedule::kBinomialTree;
  tree_->prepare(call);
  return run(*tree_, call);
}

Status Communicator::barrier() {
  // An allreduce of one byte whose messages carry the barrier's header: no
  // rank leaves before every rank has arrived. One publication each on the
  // same-host board, else recursive doubling's ceil(log2 N) exchanges (plus
  // two for the fold).
  uint8_t token = 0;
  RR_RETURN_IF_ERROR(check_usable());
  if (size_ == 1) return Status::Ok();
  exec::Call call = issue(exec::Collective::kBarrier, &token, &token, 1, rrUint8, rrMax);
  const wire::OpHeader header = wire::header_of(call);
  if (board_exec_ && settings_.allreduce_algo != algo::AllreduceAlgo::kRecursiveDoubling) {
    return allreduce_one_shot(call, header);
  }
  return allreduce_recursive_doubling(call, header);
}

Status Communicator::allreduce_recursive_doubling(exec::Call& call, const wire::OpHeader& header) {
  // A peer waiting on the same-host board sees that this rank sends frames
  // through UCX (whatever RR_CHECK_ARGUMENTS says, as agree() publishes its
  // check: every rank makes the same publications).
  RR_RETURN_IF_ERROR(announce(call, header));
  call.schedule = algo::Schedule::kRecursiveDoubling;
  recursive_doubling_->prepare(call, header);
  return run(*recursive_doubling_, call);
}


}  // namespace rr
