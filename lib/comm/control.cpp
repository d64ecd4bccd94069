#include "comm/control.hpp"

#include <sched.h>

#include "exec/tags.hpp"

namespace rr {

Status ControlChannel::start() {
  const int n = transport_->size();
  inboxes_.resize(static_cast<size_t>(n));
  sends_.resize(static_cast<size_t>(n));
  for (int peer = 0; peer < n; ++peer) {
    if (peer == transport_->rank()) continue;
    inboxes_[static_cast<size_t>(peer)] = std::make_unique<Inbox>();
    RR_RETURN_IF_ERROR(post(peer));
  }
  return Status::Ok();
}

Status ControlChannel::post(int peer) {
  Inbox& in = *inboxes_[static_cast<size_t>(peer)];
  in.posted = false;
  RR_RETURN_IF_ERROR(transport_->post_recv(peer, exec::kControlTag, in.bytes.data(), in.bytes.size(), &in.done));
  in.posted = true;
  return Status::Ok();
}

bool ControlChannel::poll(wire::Notice* out) {
  for (size_t peer = 0; peer < inboxes_.size(); ++peer) {
    Inbox* in = inboxes_[peer].get();
    if (!in || !in->posted || !in->done.done) continue;
    in->posted = false;
    if (in->done.failed) continue;  // canceled: the transport is closing
    wire::Notice notice;
    Status parsed = wire::decode_notice(in->bytes.data(), in->done.bytes, &notice);
    if (!parsed.ok()) {
      notice = wire::Notice();
      notice.origin = static_cast<int32_t>(peer);
      notice.text = "sent a malformed notice: " + parsed.message();
    }
    // A peer speaks for itself only.
    notice.origin = static_cast<int32_t>(peer);
    (void)post(static_cast<int>(peer));  // a later notice from it still gets in
    *out = std::move(notice);
    return true;
  }
  return false;
}

void ControlChannel::close(std::chrono::milliseconds limit) {
  for (auto& in : inboxes_) {
    if (in && in->posted && !in->done.done) transport_->cancel(&in->done);
  }
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool pending = false;
    for (auto& in : inboxes_) pending |= in && in->posted && !in->done.done;
    if (!pending || std::chrono::steady_clock::now() >= until) return;
    if (!transport_->progress()) sched_yield();
  }
}

void ControlChannel::tell_everyone(const wire::Notice& notice, std::chrono::milliseconds limit) {
  if (told_ || sends_.empty()) return;
  told_ = true;
  const size_t bytes = wire::encode_notice(notice, outgoing_.data());
  for (int peer = 0; peer < transport_->size(); ++peer) {
    transport::Completion& done = sends_[static_cast<size_t>(peer)];
    done.done = true;
    if (peer == transport_->rank() || !transport_->peer_status(peer).ok()) continue;
    if (!transport_->post_send(peer, exec::kControlTag, outgoing_.data(), bytes, &done).ok()) done.done = true;
  }
  // Done sends may still be held by the transport (transport.hpp, "flushing"):
  // the notice must reach peers that this rank will not progress again.
  const auto until = std::chrono::steady_clock::now() + limit;
  bool flush_begun = false;
  for (;;) {
    bool pending = false;
    for (const auto& done : sends_) pending |= !done.done;
    if (!pending && !flush_begun) {
      flush_begun = true;
      transport_->begin_flush();
    }
    if (!pending && transport_->flush_waiting_for() < 0) return;
    if (std::chrono::steady_clock::now() >= until) return;
    if (!transport_->progress()) sched_yield();
  }
}

}  // namespace rr
