#include "transport/loopback/loopback.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>

namespace rr::transport {

namespace {
constexpr int kErrTruncated = 1;
constexpr int kErrCanceled = 2;
}  // namespace

LoopbackFabric::LoopbackFabric(int nranks) : failed_(new std::atomic<bool>[nranks]) {
  for (int r = 0; r < nranks; ++r) {
    inboxes_.push_back(std::make_unique<Inbox>());
    failed_[r] = false;
  }
}

void LoopbackFabric::fail_rank(int rank) {
  failed_[rank] = true;
  for (auto& inbox : inboxes_) inbox->arrived.notify_all();
}

bool LoopbackFabric::failed(int rank) const { return failed_[rank].load(); }

LoopbackTransport::LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank)
    : fabric_(std::move(fabric)), rank_(rank), counters_(fabric_->size()) {}

LoopbackTransport::~LoopbackTransport() = default;

int LoopbackTransport::size() const { return fabric_->size(); }

Status LoopbackTransport::post_send(int peer, uint64_t tag, const void* buf, size_t bytes,
                                    Completion* done) {
  if (fabric_->failed(peer)) return RemoteError("rank " + std::to_string(peer) + " has failed");
  LoopbackFabric::Message message{rank_, tag & kTagMask, {}};
  message.payload.assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
  auto& inbox = *fabric_->inboxes_[peer];
  {
    std::lock_guard<std::mutex> lock(inbox.mutex);
    inbox.messages.push_back(std::move(message));
  }
  inbox.arrived.notify_one();
  counters_[peer].sent += bytes;
  done->reset();
  done->peer = peer;
  done->done = true;  // buffered: the caller may reuse buf now
  return Status::Ok();
}

Status LoopbackTransport::post_recv(int peer, uint64_t tag, void* buf, size_t bytes,
                                    Completion* done) {
  done->reset();
  done->peer = peer;
  posted_.push_back(PostedRecv{peer, tag & kTagMask, buf, bytes, done});
  return Status::Ok();
}

void LoopbackTransport::cancel_posted(Completion* pending) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->done == pending) {
      pending->done = true;
      pending->failed = true;
      pending->error = kErrCanceled;
      posted_.erase(it);
      return;
    }
  }
}

bool LoopbackTransport::progress_posted() {
  auto& inbox = *fabric_->inboxes_[rank_];
  bool progressed = false;
  std::lock_guard<std::mutex> lock(inbox.mutex);
  // Messages between one pair with one tag match in send order, as in UCX.
  for (auto it = inbox.messages.begin(); it != inbox.messages.end();) {
    auto match = posted_.end();
    for (auto p = posted_.begin(); p != posted_.end(); ++p) {
      if ((p->peer == it->src || p->peer == kAnySource) && p->tag == it->tag) {
        match = p;
        break;
      }
    }
    if (match == posted_.end()) {
      ++it;
      continue;
    }
    Completion* done = match->done;
    done->peer = it->src;  // a kAnySource receive learns its sender
    size_t len = it->payload.size();
    if (len > match->bytes) {
      done->failed = true;
      done->error = kErrTruncated;
      len = match->bytes;
    }
    if (len > 0) std::memcpy(match->buf, it->payload.data(), len);
    done->bytes = len;
    done->done = true;
    counters_[it->src].received += len;
    posted_.erase(match);
    it = inbox.messages.erase(it);
    progressed = true;
  }
  return progressed;
}

void LoopbackTransport::wait_for_events(int timeout_ms) {
  auto& inbox = *fabric_->inboxes_[rank_];
  std::unique_lock<std::mutex> lock(inbox.mutex);
  inbox.arrived.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                         [&] { return !inbox.messages.empty(); });
}

Status LoopbackTransport::peer_status(int peer) const {
  if (fabric_->failed(peer)) return RemoteError("rank " + std::to_string(peer) + " has failed");
  return Status::Ok();
}

std::string LoopbackTransport::describe_posted_error(const Completion& c) const {
  switch (c.error) {
    case kErrTruncated: return "message from rank " + std::to_string(c.peer) + " longer than the receive buffer";
    case kErrCanceled: return "canceled";
    default: return "loopback error " + std::to_string(c.error);
  }
}

}  // namespace rr::transport
