// Point-to-point on a communicator: blocking sends and receives, the ones a
// group queues (flush_group posts them together), and the non-blocking ones
// lib/api/ hands out as requests.

#include <string>

#include "comm/communicator.hpp"
#include "exec/tags.hpp"
#include "exec/wait_policy.hpp"
#include "reduce/reduce.hpp"

namespace rr {

Status Communicator::point_to_point(bool is_send, void* buf, size_t count, rrDataType_t dtype, int peer,
                                    bool grouped) {
  RR_RETURN_IF_ERROR(check_usable());
  RR_RETURN_IF_ERROR(check_peer(is_send ? "rrSend" : "rrRecv", "peer", peer));
  const size_t bytes = count * reduce::dtype_size(dtype);
  exec::Batch& batch = grouped ? *group_ : *batch_;
  if (is_send) {
    batch.add_send(peer, exec::kP2pTag, buf, bytes);
  } else {
    batch.add_recv(peer, exec::kP2pTag, buf, bytes);
  }
  if (grouped) return Status::Ok();  // posted by flush_group()
  if (peer == rank_) {
    batch.clear();
    return InvalidUsage(std::string(is_send ? "rrSend: a send to itself" : "rrRecv: a receive from itself") +
                        " (peer=" + std::to_string(peer) +
                        ") can only complete inside rrGroupStart/rrGroupEnd with its partner call");
  }
  return run_batch(batch, (is_send ? "send to rank " : "receive from rank ") + std::to_string(peer));
}

Status Communicator::flush_group() {
  if (group_->size() == 0) return Status::Ok();
  Status usable = check_usable();
  if (!usable.ok()) {
    group_->clear();  // nothing was posted: drop the queue
    return usable;
  }
  return run_batch(*group_, "group of " + std::to_string(group_->size()) + " sends and receives");
}

Status Communicator::post_p2p(bool is_send, void* buf, size_t count, rrDataType_t dtype, int peer,
                              transport::Completion* done) {
  RR_RETURN_IF_ERROR(check_usable());
  RR_RETURN_IF_ERROR(check_peer(is_send ? "rrIsend" : "rrIrecv", "peer", peer));
  const size_t bytes = count * reduce::dtype_size(dtype);
  done->reset();
  done->peer = peer;
  if (bytes == 0) {
    done->done = true;  // both sides skip empty messages
    return Status::Ok();
  }
  return is_send ? transport_->post_send(peer, exec::kP2pTag, buf, bytes, done)
                 : transport_->post_recv(peer, exec::kP2pTag, buf, bytes, done);
}

Status Communicator::wait_p2p(const transport::Completion& done, bool is_send, size_t bytes, int peer, bool block,
                              bool* finished) {
  const std::string what = std::string(is_send ? "send of " : "receive of ") + std::to_string(bytes) + " bytes " +
                           (is_send ? "to" : "from") + " rank " + std::to_string(peer);
  exec::WaitPolicy wait(transport_.get(), deadline(), this);
  *finished = false;
  for (;;) {
    const bool moved = transport_->progress();
    if (done.done) break;
    Status interrupted = wait.interrupted();
    if (!interrupted.ok()) return Status(interrupted.code(), what + ": " + interrupted.message());
    Status alive = transport_->peer_status(peer);
    if (!alive.ok()) return RemoteError(what + ": " + alive.message());
    if (!block) return Status::Ok();
    if (wait.expired()) {
      return Timeout(what + ": rank " + std::to_string(rank_) + " waited " + std::to_string(settings_.timeout_ms) +
                     " ms");
    }
    if (moved) {
      wait.reset();
    } else {
      wait.idle();
    }
  }
  *finished = true;
  if (done.failed) {
    return RemoteError(what + " failed: " + transport_->describe_error(done) +
                       (is_send ? "" : " (a longer message than the receive's count?)"));
  }
  if (!is_send && done.bytes != bytes) {
    return RemoteError(what + ": rank " + std::to_string(peer) + " sent " + std::to_string(done.bytes) +
                       " bytes, expected " + std::to_string(bytes));
  }
  return Status::Ok();
}

}  // namespace rr
