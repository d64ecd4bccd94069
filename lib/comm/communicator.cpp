#include "comm/communicator.hpp"

#include <cstring>

#include "algo/ring.hpp"
#include "common/log.hpp"
#include "reduce/reduce.hpp"

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
      keepalive_(std::move(keepalive)) {}

Communicator::~Communicator() {
  // The transport goes first: closing it may still complete requests into the
  // executor's completions and the pool's slots, which must outlive it.
  transport_.reset();
  ring_.reset();
}

Status Communicator::init() {
  // The ring's tag carries the step in 16 bits, and a ring of N has 2(N-1) steps.
  if (size_ > kMaxRanks) {
    return InvalidArgument("nranks=" + std::to_string(size_) + ": at most " + std::to_string(kMaxRanks) +
                           " ranks are supported");
  }
  if (size_ > 1) {
    // Two staging slots per column in flight: one being reduced, one receiving.
    RR_RETURN_IF_ERROR(pool_.reserve(settings_.chunk_bytes, 2 * static_cast<size_t>(settings_.pipeline_depth)));
    RR_RETURN_IF_ERROR(transport_->register_memory(pool_.data(), pool_.bytes()));
  }
  ring_ = std::make_unique<exec::RingExecutor>(transport_.get(), &pool_, settings_.pipeline_depth, size_);
  if (rank_ == 0) {
    RR_LOG(LogLevel::kInfo, "rank 0 of %d: chunk_bytes=%zu (%s) pipeline_depth=%d (%s) timeout_ms=%d (%s), staging %zu bytes",
           size_, settings_.chunk_bytes, settings_.chunk_bytes_source.c_str(), settings_.pipeline_depth,
           settings_.pipeline_depth_source.c_str(), settings_.timeout_ms, settings_.timeout_ms_source.c_str(),
           pool_.bytes());
  }
  return Status::Ok();
}

Status Communicator::check_usable() const {
  if (!broken_.ok()) {
    return InvalidUsage("communicator is unusable after an earlier failure (" + broken_.message() +
                        "); destroy it and make a new one");
  }
  return Status::Ok();
}

Status Communicator::run_ring(const char* name, const void* send, void* recv, size_t count, rrDataType_t dtype,
                              rrRedOp_t op, int shift, algo::RingPhases phases) {
  const size_t elem_bytes = reduce::dtype_size(dtype);
  size_t chunk_elems = settings_.chunk_bytes / elem_bytes;
  if (chunk_elems == 0) chunk_elems = 1;
  const size_t largest_segment = (count + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_);
  if (largest_segment / chunk_elems >= kMaxColumns) {
    return InvalidArgument(std::string(name) + ": " + std::to_string(count) + " elements need more than 2^24 chunks of " +
                           std::to_string(settings_.chunk_bytes) + " bytes; raise RR_CHUNK_BYTES");
  }
  algo::RingSchedule schedule(size_, rank_, count, chunk_elems, shift, phases);
  exec::RingCall call;
  call.name = name;
  call.sequence = sequence_++;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = dtype;
  call.op = op;
  call.deadline = exec::Clock::now() + std::chrono::milliseconds(settings_.timeout_ms);
  Status status = ring_->run(schedule, call);
  if (!status.ok()) broken_ = status;  // peers may be mid-operation: this ring is no longer in step
  return status;
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, rrDataType_t dtype, rrRedOp_t op) {
  RR_RETURN_IF_ERROR(check_usable());
  if (count == 0) return Status::Ok();
  if (size_ == 1) {
    // One rank: the result is the input (avg over one rank divides by one).
    reduce::finish(recv, send, count, dtype, op, 1);
    return Status::Ok();
  }
  return run_ring("allreduce", send, recv, count, dtype, op, 0, algo::RingPhases::kBoth);
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
  return run_ring("reduce-scatter", send, recv, recvcount * static_cast<size_t>(size_), dtype, op, -1,
                  algo::RingPhases::kReduceScatter);
}

Status Communicator::all_gather(const void* send, void* recv, size_t sendcount, rrDataType_t dtype) {
  RR_RETURN_IF_ERROR(check_usable());
  if (sendcount == 0) return Status::Ok();
  const size_t bytes = sendcount * reduce::dtype_size(dtype);
  // This rank's own block is a local copy (none when in place).
  uint8_t* own = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank_) * bytes;
  if (own != send) std::memcpy(own, send, bytes);
  if (size_ == 1) return Status::Ok();
  return run_ring("all-gather", send, recv, sendcount * static_cast<size_t>(size_), dtype, rrSum, -1,
                  algo::RingPhases::kAllGather);
}

}  // namespace rr
