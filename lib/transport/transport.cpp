// The transport's queue of posts made from threads that do not drive it.

#include "transport/transport.hpp"

#include <algorithm>

namespace rr::transport {

namespace {
// Completion::error of a post that was never made: refused, or withdrawn.
constexpr int kNotPosted = -0x7272;
}  // namespace

void Transport::post_later(bool is_send, int peer, uint64_t tag, void* buf, size_t bytes, Completion* done) {
  done->reset();
  done->peer = peer;
  std::lock_guard<std::mutex> lock(later_mutex_);
  later_.push_back(Later{is_send, peer, tag, buf, bytes, done});
  has_later_.store(true, std::memory_order_release);
}

void Transport::post_queued() {
  if (!has_later_.load(std::memory_order_acquire)) return;  // the common case: no lock
  std::vector<Later> posts;
  {
    std::lock_guard<std::mutex> lock(later_mutex_);
    posts.swap(later_);
    has_later_.store(false, std::memory_order_release);
  }
  for (const Later& p : posts) {
    Status posted = p.is_send ? post_send(p.peer, p.tag, p.buf, p.bytes, p.done)
                              : post_recv(p.peer, p.tag, p.buf, p.bytes, p.done);
    if (posted.ok()) continue;
    {
      std::lock_guard<std::mutex> lock(refused_mutex_);
      refused_[p.done] = posted.message();
    }
    p.done->failed = true;
    p.done->error = kNotPosted;
    p.done->done = true;
  }
}

bool Transport::withdraw(Completion* pending) {
  if (!has_later_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(later_mutex_);
  auto it = std::find_if(later_.begin(), later_.end(), [&](const Later& p) { return p.done == pending; });
  if (it == later_.end()) return false;
  later_.erase(it);
  has_later_.store(!later_.empty(), std::memory_order_release);
  {
    std::lock_guard<std::mutex> refused(refused_mutex_);
    refused_[pending] = "canceled before it was posted";
  }
  pending->failed = true;
  pending->error = kNotPosted;
  pending->done = true;
  return true;
}

std::string Transport::describe_error(const Completion& c) const {
  if (c.error == kNotPosted) {
    std::lock_guard<std::mutex> lock(refused_mutex_);
    auto it = refused_.find(&c);
    if (it != refused_.end()) return it->second;
  }
  return describe_posted_error(c);
}

}  // namespace rr::transport
