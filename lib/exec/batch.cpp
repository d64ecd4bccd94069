#include "exec/batch.hpp"

#include <sched.h>

#include "exec/wait_policy.hpp"

namespace rr::exec {

namespace {
// Where an empty transfer points when its buffer may be NULL: transports
// need not accept a NULL buffer even for zero bytes.
uint8_t empty_buffer[1];
}  // namespace

void Batch::add_send(int peer, uint64_t tag, const void* buf, size_t bytes, bool post_empty) {
  Transfer t;
  t.is_send = true;
  t.peer = peer;
  t.tag = tag;
  t.buf = bytes == 0 ? empty_buffer : const_cast<void*>(buf);
  t.bytes = bytes;
  t.post_empty = post_empty;
  transfers_.push_back(t);
}

void Batch::add_recv(int peer, uint64_t tag, void* buf, size_t bytes, bool post_empty) {
  Transfer t;
  t.peer = peer;
  t.tag = tag;
  t.buf = bytes == 0 ? empty_buffer : buf;
  t.bytes = bytes;
  t.post_empty = post_empty;
  transfers_.push_back(t);
}

void Batch::add_recv_up_to(int peer, uint64_t tag, void* buf, size_t capacity) {
  add_recv(peer, tag, buf, capacity, true);
  transfers_.back().up_to = true;
}

Status Batch::check(const Transfer& t, const std::string& what) const {
  if (t.done.failed) {
    // A peer that died fails the transfer too: say so, not what a live
    // peer's failure would suggest.
    const Status alive = transport_->peer_status(t.peer);
    return RemoteError(what + ": rank " + std::to_string(transport_->rank()) + " failed to " +
                       (t.is_send ? "send " : "receive ") + std::to_string(t.bytes) + " bytes " +
                       (t.is_send ? "to" : "from") + " rank " + std::to_string(t.peer) + ": " +
                       (alive.ok() ? transport_->describe_error(t.done) +
                                         (t.is_send ? "" : " (a longer message than the receive's count?)")
                                   : alive.message()));
  }
  if (!t.is_send && !t.up_to && t.done.bytes != t.bytes) {
    return RemoteError(what + ": rank " + std::to_string(t.peer) + " sent " + std::to_string(t.done.bytes) +
                       " bytes, rank " + std::to_string(transport_->rank()) + " expected " + std::to_string(t.bytes) +
                       " (do both sides pass the same count and datatype?)");
  }
  return Status::Ok();
}

Status Batch::post(const std::string& what) {
  finished_ = 0;
  next_needed_ = 0;
  poll_wait_.reset();
  for (Transfer& t : transfers_) {
    t.done.reset();
    t.done.done = true;  // not posted yet: nothing to wait for
  }
  // Posts another thread handed over while an operation ran go first:
  // messages of one sender and tag match in the order they were posted
  // (a grouped receive of 0 bytes must not overtake an earlier rrIrecv).
  transport_->post_queued();
  // Receives first: every rank's sends then find a matching receive posted.
  for (int pass = 0; pass < 2; ++pass) {
    for (Transfer& t : transfers_) {
      if (t.is_send != (pass == 1)) continue;
      if (t.bytes == 0 && !t.post_empty) continue;  // both sides skip empty messages
      Status status = t.is_send ? transport_->post_send(t.peer, t.tag, t.buf, t.bytes, &t.done)
                                : transport_->post_recv(t.peer, t.tag, t.buf, t.bytes, &t.done);
      if (!status.ok() && t.is_send && past_lost_peers_ && !transport_->peer_status(t.peer).ok()) {
        t.done.done = true;  // progress() reports it, once the rest are posted
        t.done.failed = true;
        continue;
      }
      if (!status.ok()) {
        t.done.done = true;
        cancel();
        return Status(status.code(), what + ": " + status.message());
      }
    }
  }
  return Status::Ok();
}

Status Batch::progress(const std::string& what, Round* round) {
  round->transport_moved = transport_->progress();
  size_t now_finished = 0;
  for (const Transfer& t : transfers_) {
    if (!t.done.done) continue;
    ++now_finished;
    RR_RETURN_IF_ERROR(check(t, what));
  }
  round->done = now_finished == transfers_.size();
  if (now_finished != finished_) {
    finished_ = now_finished;
    round->moved = true;
  }
  return Status::Ok();
}

const Transfer* Batch::waiting(int peer) const {
  for (const Transfer& t : transfers_) {
    if (!t.done.done && (peer < 0 || t.peer == peer)) return &t;
  }
  return peer < 0 ? nullptr : waiting();
}

void Batch::needs(int* from, int* to) const {
  *from = -1;
  *to = -1;
  const size_t n = transfers_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_needed_ + k) % n;
    const Transfer& t = transfers_[i];
    if (t.done.done) continue;
    next_needed_ = i + 1;
    (t.is_send ? *to : *from) = t.peer;
    return;
  }
}

Status Batch::stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const {
  return stalled_at(what, std::string(), code, cause, failed_peer);
}

Status Batch::stalled_at(const std::string& what, const std::string& step, Code code, const std::string& cause,
                         int failed_peer) const {
  // Built only when it is needed: a still round must not allocate.
  std::string where = what;
  if (const Transfer* t = waiting(failed_peer)) {
    where += ": rank " + std::to_string(transport_->rank()) + " waited to " +
             (t->is_send ? "send " : t->up_to ? "receive up to " : "receive ") + std::to_string(t->bytes) +
             " bytes " + (t->is_send ? "to" : "from") + " rank " + std::to_string(t->peer);
  }
  const std::string progress = (step.empty() ? "" : step + ", ") + std::to_string(finished_) + " of " +
                               std::to_string(transfers_.size()) + " transfers done";
  if (code == Code::kOk) return Status(code, where + " in progress (" + progress + ")");
  if (code == Code::kTimeout) return Timeout(where + " (" + progress + ")");
  return Status(code, where + ": " + cause);
}

Status Batch::poll(const std::string& what, std::chrono::steady_clock::time_point deadline, Interrupt* interrupt,
                   bool* finished) {
  if (!poll_wait_) poll_wait_.emplace(transport_, deadline, interrupt, nullptr, WaitMode::kSpin);
  return drive_round(*this, what, *poll_wait_, finished);
}

void Batch::cancel() {
  for (Transfer& t : transfers_) {
    if (!t.done.done && !t.is_send) transport_->cancel(&t.done);
  }
  const auto limit = std::chrono::steady_clock::now() + kDrainLimit;
  for (;;) {
    bool pending = false;
    for (const Transfer& t : transfers_) pending |= !t.done.done && !(t.is_send && !transport_->peer_status(t.peer).ok());
    if (!pending || std::chrono::steady_clock::now() > limit) break;
    if (!transport_->progress()) sched_yield();
  }
}

}  // namespace rr::exec
