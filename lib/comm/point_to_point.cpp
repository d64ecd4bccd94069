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
  const size_t bytes = count * reduce::dtype_size(dtype);
  exec::Batch& batch = grouped ? *group_ : *batch_;
  // Empty messages are messages, as post_p2p's (tag 0 both).
  if (is_send) {
    batch.add_send(peer, exec::kP2pTag, buf, bytes, /*post_empty=*/true);
  } else {
    batch.add_recv(peer, exec::kP2pTag, buf, bytes, /*post_empty=*/true);
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

Status Communicator::post_group() {
  if (group_->size() == 0) return Status::Ok();
  Status usable = check_usable();
  if (!usable.ok()) {
    group_->clear();
    return usable;
  }
  group_name_ = "group of " + std::to_string(group_->size()) + " sends and receives";
  group_deadline_ = deadline();
  Status posted = group_->post(group_name_);
  if (!posted.ok()) group_->clear();
  return fail_operation(posted);
}

Status Communicator::poll_group(bool* finished) {
  *finished = group_->size() == 0;
  if (*finished) return Status::Ok();
  Status status = group_->poll(group_name_, group_deadline_, this, finished);
  if (*finished || !status.ok()) {
    *finished = true;
    group_->clear();
  }
  return fail_operation(status);
}

Status Communicator::post_p2p(bool is_send, void* buf, size_t count, rrDataType_t dtype, int peer, int tag,
                              transport::Completion* done, bool driving) {
  if (driving) {
    RR_RETURN_IF_ERROR(check_usable());
  } else if (aborting()) {
    return InvalidUsage("the communicator was aborted (rrCommAbort)");
  } else if (async_error() != rrSuccess) {
    // broken_ is the driving thread's; its failure's text is last_error().
    return InvalidUsage("communicator is unusable after an earlier failure (" + last_error() +
                        "); destroy it and make a new one");
  }
  // The peer and the tag were checked at the entry point (lib/api).
  const size_t bytes = count * reduce::dtype_size(dtype);
  // Empty messages are messages too: an any-source receive of nothing
  // still learns who sent it, and a count that disagrees is still seen.
  static uint8_t empty[1];
  if (bytes == 0) buf = empty;
  if (!driving) {
    transport_->post_later(is_send, peer, exec::p2p_tag(tag), buf, bytes, done);
    return Status::Ok();
  }
  transport_->post_queued();  // those queued before this one go first
  done->reset();
  done->peer = peer;
  return is_send ? transport_->post_send(peer, exec::p2p_tag(tag), buf, bytes, done)
                 : transport_->post_recv(peer, exec::p2p_tag(tag), buf, bytes, done);
}

namespace {

// "receive of 8 bytes from rank 2 (tag 5)", "... from any rank", "send of 8 bytes to rank 1".
std::string describe_p2p(bool is_send, size_t bytes, int peer, int tag) {
  std::string text = std::string(is_send ? "send of " : "receive of ") + std::to_string(bytes) + " bytes " +
                     (is_send ? "to " : "from ") +
                     (peer == transport::kAnySource ? std::string("any rank") : "rank " + std::to_string(peer));
  return tag == 0 ? text : text + " (tag " + std::to_string(tag) + ")";
}

}  // namespace

Status Communicator::wait_p2p(const transport::Completion& done, bool is_send, size_t bytes, int peer, int tag,
                              bool block, bool* finished) {
  exec::WaitPolicy wait(transport_.get(), deadline(), this);
  *finished = false;
  for (;;) {
    const bool moved = transport_->progress();
    if (done.done) break;
    Status interrupted = wait.interrupted();
    if (!interrupted.ok()) {
      return Status(interrupted.code(), describe_p2p(is_send, bytes, peer, tag) + ": " + interrupted.message());
    }
    // Any rank may yet send an any-source receive its message: none is
    // waited on in particular (a dead one is heard of by notice).
    if (peer != transport::kAnySource) {
      Status alive = transport_->peer_status(peer);
      if (!alive.ok()) return RemoteError(describe_p2p(is_send, bytes, peer, tag) + ": " + alive.message());
    }
    if (!block) return Status::Ok();
    if (wait.expired()) {
      return Timeout(describe_p2p(is_send, bytes, peer, tag) + ": rank " + std::to_string(rank_) + " waited " +
                     std::to_string(current_timeout().count()) + " ms");
    }
    if (moved) {
      wait.reset();
    } else {
      wait.idle();
    }
  }
  *finished = true;
  // An any-source receive that matched names its sender.
  const int from = done.peer >= 0 ? done.peer : peer;
  if (done.failed) {
    // A sender that died fails the receive too: say so, not what a live
    // sender's longer message would.
    const Status alive = from >= 0 ? transport_->peer_status(from) : Status::Ok();
    if (!alive.ok()) return RemoteError(describe_p2p(is_send, bytes, from, tag) + " failed: " + alive.message());
    return RemoteError(describe_p2p(is_send, bytes, from, tag) + " failed: " + transport_->describe_error(done) +
                       (is_send ? "" : " (a longer message than the receive's count?)"));
  }
  if (!is_send && done.bytes != bytes) {
    return RemoteError(describe_p2p(is_send, bytes, from, tag) + ": rank " + std::to_string(from) + " sent " +
                       std::to_string(done.bytes) + " bytes, expected " + std::to_string(bytes));
  }
  return Status::Ok();
}

}  // namespace rr
