#include "coll/agreement.hpp"

#include <sched.h>

#include <cstring>

#include "exec/tags.hpp"

namespace rr::coll {

namespace {

constexpr uint32_t kMagic = 0x47415252;  // "RRAG"
constexpr size_t kHeaderBytes = 12;

size_t message_bytes(int size) { return kHeaderBytes + (static_cast<size_t>(size) + 7) / 8; }

std::string set_text(const std::vector<bool>& set) {
  std::string text = "{";
  for (size_t r = 0; r < set.size(); ++r) {
    if (set[r]) text += (text.size() > 1 ? ", " : "") + std::to_string(r);
  }
  return text + "}";
}

}  // namespace

Agreement::Agreement(transport::Transport* transport, uint64_t epoch, std::vector<bool> failed,
                     std::chrono::milliseconds silence)
    : transport_(transport),
      rank_(transport->rank()),
      size_(transport->size()),
      epoch_(epoch),
      silence_(silence),
      failed_(std::move(failed)),
      peers_(static_cast<size_t>(size_)) {
  failed_.resize(static_cast<size_t>(size_), false);
  for (Peer& p : peers_) p.in.resize(message_bytes(size_));
}

Status Agreement::post(const std::string& what) {
  round_ = 0;
  decided_ = false;
  silent_after_ = exec::Clock::now() + silence_;
  return start_round(what);
}

Status Agreement::start_round(const std::string& what) {
  next_ = failed_;
  failure_seen_ = false;
  all_equal_ = true;
  adopted_ = false;
  const std::vector<bool>& set = decided_ ? decision_ : failed_;
  std::vector<uint8_t>& out = out_.emplace_back(message_bytes(size_), 0);
  const uint32_t header[3] = {kMagic, decided_ ? kDecided : kProposal, static_cast<uint32_t>(round_)};
  std::memcpy(out.data(), header, kHeaderBytes);
  for (int r = 0; r < size_; ++r) {
    if (set[static_cast<size_t>(r)]) out[kHeaderBytes + static_cast<size_t>(r) / 8] |= uint8_t(1u << (r % 8));
  }
  const uint64_t tag = exec::agreement_tag(epoch_, static_cast<uint64_t>(round_));
  // Receives first, as a batch posts them: a peer's message then finds one.
  for (int r = 0; r < size_ && !decided_; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    if (r == rank_ || failed_[static_cast<size_t>(r)]) continue;
    p.recv.reset();
    p.loss_seen = false;
    Status posted = transport_->post_recv(r, tag, p.in.data(), p.in.size(), &p.recv);
    if (!posted.ok()) {
      if (!unreachable(r, posted)) return Status(posted.code(), what + ": " + posted.message());
      mark_failed(r);
      continue;
    }
    p.posted = true;
    p.waiting = true;
  }
  // To rank + 1, rank + 2, ... (wrapping): at any moment the ranks'
  // messages go to different ranks, where ascending order would have every
  // rank send to rank 0 first (an incast at its NIC).
  for (int k = 1; k < size_; ++k) {
    const int r = (rank_ + k) % size_;
    if (set[static_cast<size_t>(r)] || !transport_->peer_status(r).ok()) continue;
    transport::Completion& done = sends_.emplace_back();
    send_peers_.push_back(r);
    Status posted = transport_->post_send(r, tag, out.data(), out.size(), &done);
    if (!posted.ok()) {
      done.done = true;
      if (!unreachable(r, posted)) return Status(posted.code(), what + ": " + posted.message());
      if (!decided_) {
        Peer& p = peers_[static_cast<size_t>(r)];
        if (p.waiting) {
          transport_->cancel(&p.recv);
          p.waiting = false;
        }
        mark_failed(r);
      }
    }
  }
  return Status::Ok();
}

bool Agreement::unreachable(int peer, const Status& posted) const {
  // A peer the transport cannot reach (UCX cannot make an endpoint to a
  // rank on another host whose process is gone: its address no longer
  // answers) is as failed as one it saw die: the detector's word.
  return posted.code() == Code::kRemoteError || !transport_->peer_status(peer).ok();
}

void Agreement::mark_failed(int peer) {
  next_[static_cast<size_t>(peer)] = true;
  failure_seen_ = true;
}

Status Agreement::take(int peer, const std::string& what) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  uint32_t header[3] = {0, 0, 0};
  if (p.recv.bytes != p.in.size()) {
    return RemoteError(what + ": rank " + std::to_string(peer) + " sent " + std::to_string(p.recv.bytes) +
                       " bytes in round " + std::to_string(round_) + ", rank " + std::to_string(rank_) +
                       " expected " + std::to_string(p.in.size()) + " (a communicator of another size?)");
  }
  std::memcpy(header, p.in.data(), kHeaderBytes);
  if (header[0] != kMagic || header[1] > kDecided || header[2] != static_cast<uint32_t>(round_)) {
    return RemoteError(what + ": rank " + std::to_string(peer) + " sent a malformed message in round " +
                       std::to_string(round_));
  }
  std::vector<bool> theirs(static_cast<size_t>(size_), false);
  for (int r = 0; r < size_; ++r) {
    theirs[static_cast<size_t>(r)] = (p.in[kHeaderBytes + static_cast<size_t>(r) / 8] >> (r % 8)) & 1;
  }
  if (theirs[static_cast<size_t>(rank_)]) {
    return RemoteError(what + ": rank " + std::to_string(peer) + " counts rank " + std::to_string(rank_) +
                       " as failed " + set_text(theirs) + " (it did not hear from it within the timeout)");
  }
  if (header[1] == kDecided) {
    if (!adopted_) adopted_set_ = theirs;
    adopted_ = true;
    return Status::Ok();
  }
  if (theirs != failed_) all_equal_ = false;
  for (int r = 0; r < size_; ++r) {
    if (theirs[static_cast<size_t>(r)]) next_[static_cast<size_t>(r)] = true;
  }
  return Status::Ok();
}

Status Agreement::settle(const std::string& what, bool* moved) {
  const bool silent = exec::Clock::now() >= silent_after_;
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    if (!p.waiting) continue;
    if (p.recv.done) {
      p.waiting = false;
      *moved = true;
      if (p.recv.failed) {
        if (transport_->peer_status(r).ok()) {
          return RemoteError(what + ": rank " + std::to_string(rank_) + " failed to receive round " +
                             std::to_string(round_) + " from rank " + std::to_string(r) + ": " +
                             transport_->describe_error(p.recv));
        }
        mark_failed(r);
        continue;
      }
      RR_RETURN_IF_ERROR(take(r, what));
      continue;
    }
    // A loss is believed when seen in two rounds running: the transport may
    // report it before it matched what the peer sent just before leaving.
    const bool lost = !transport_->peer_status(r).ok();
    if (lost && !p.loss_seen) {
      p.loss_seen = true;
      continue;
    }
    if (!lost && !silent) continue;
    if (!lost) {
      timed_out_.push_back(r);
      silent_after_ = exec::Clock::now() + silence_;  // the others get as long again
    }
    transport_->cancel(&p.recv);  // finishes at a later progress(); its buffer stays ours
    p.waiting = false;
    *moved = true;
    mark_failed(r);
  }
  return Status::Ok();
}

Status Agreement::finish_round(const std::string& what) {
  if (adopted_) {
    decision_ = adopted_set_;
  } else if (!failure_seen_ && all_equal_) {
    decision_ = failed_;
  } else {
    failed_ = next_;
    ++round_;
    if (round_ >= 1 << 20) return InternalError(what + ": no decision after 2^20 rounds");
    return start_round(what);
  }
  decided_ = true;
  ++round_;  // the decision goes out as the next round's message
  Status told = start_round(what);
  --round_;
  return told;
}

bool Agreement::receives_done() const {
  for (const Peer& p : peers_) {
    if (p.posted && !p.recv.done) return false;
  }
  return true;
}

bool Agreement::sends_done() const {
  for (size_t i = 0; i < sends_.size(); ++i) {
    if (!sends_[i].done && transport_->peer_status(send_peers_[i]).ok()) return false;
  }
  return true;
}

Status Agreement::progress(const std::string& what, exec::Round* round) {
  round->transport_moved = transport_->progress();
  if (!decided_) {
    bool moved = false;
    RR_RETURN_IF_ERROR(settle(what, &moved));
    round->moved = moved;
    bool waiting = false;
    for (const Peer& p : peers_) waiting |= p.waiting;
    if (!waiting) {
      RR_RETURN_IF_ERROR(finish_round(what));
      round->moved = true;
    }
  }
  if (decided_) {
    // Canceled receives (lost or silent peers) must finish before their
    // buffers go.
    round->done = sends_done() && receives_done();
  }
  return Status::Ok();
}

Status Agreement::stalled(const std::string& what, Code code, int, const std::string& cause) const {
  std::string where = what + ": rank " + std::to_string(rank_) + " in round " + std::to_string(round_);
  if (decided_) {
    where += ", decided " + set_text(decision_) + ", waited for its sends to finish";
  } else {
    where += " (failed so far " + set_text(failed_) + ") waited for rank";
    std::string who;
    for (int r = 0; r < size_; ++r) {
      if (peers_[static_cast<size_t>(r)].waiting) who += (who.empty() ? " " : ", ") + std::to_string(r);
    }
    where += who;
  }
  if (code == Code::kTimeout) return Timeout(where);
  if (code == Code::kOk) return Status(code, where + " in progress");
  return Status(code, where + ": " + cause);
}

void Agreement::cancel() {
  for (Peer& p : peers_) {
    if (p.waiting) transport_->cancel(&p.recv);
    p.waiting = false;
  }
  const auto limit = exec::Clock::now() + exec::kDrainLimit;
  for (;;) {
    if ((sends_done() && receives_done()) || exec::Clock::now() > limit) break;
    if (!transport_->progress()) sched_yield();
  }
}

std::vector<int> Agreement::decided() const {
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r) {
    if (decided_ && decision_[static_cast<size_t>(r)]) ranks.push_back(r);
  }
  return ranks;
}

}  // namespace rr::coll
