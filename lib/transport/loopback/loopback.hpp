#pragma once
// An in-process transport: N ranks as threads of one process, for unit tests
// and simulation of the executor at rank counts a test machine cannot run as
// processes. A send copies into the destination's inbox and completes at
// once; the destination matches it on its own thread in progress(), so a
// Completion is only ever written by its owner's thread.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.hpp"

namespace rr::transport {

class LoopbackFabric;

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackFabric> fabric, int rank);
  ~LoopbackTransport() override;

  int rank() const override { return rank_; }
  int size() const override;
  const char* name() const override { return "loopback"; }

  Status post_send(int peer, uint64_t tag, const void* buf, size_t bytes, Completion* done) override;
  Status post_recv(int peer, uint64_t tag, void* buf, size_t bytes, Completion* done) override;
  void cancel_posted(Completion* pending) override;
  bool progress_posted() override;
  void wait_for_events(int timeout_ms) override;
  Status register_memory(void*, size_t) override { return Status::Ok(); }
  void deregister_memory(void*) override {}
  Status make_sibling(int, int, std::unique_ptr<Transport>*) const override {
    return InvalidUsage("the loopback transport cannot make sub-communicators");
  }
  const std::vector<uint8_t>& local_address() const override { return no_address_; }
  Status connect(std::vector<std::vector<uint8_t>>, const std::vector<int>&) override { return Status::Ok(); }
  Status peer_status(int peer) const override;
  std::string describe_posted_error(const Completion& c) const override;

 protected:
  const Counters& counters(int peer) const override { return counters_[peer]; }

 private:
  struct PostedRecv {
    int peer;
    uint64_t tag;
    void* buf;
    size_t bytes;
    Completion* done;
  };

  std::shared_ptr<LoopbackFabric> fabric_;
  int rank_;
  std::vector<PostedRecv> posted_;
  std::vector<Counters> counters_;
  std::vector<uint8_t> no_address_;
};

// The shared medium: one inbox per rank.
class LoopbackFabric {
 public:
  explicit LoopbackFabric(int nranks);
  int size() const { return static_cast<int>(inboxes_.size()); }
  // Marks `rank` dead: its peers see peer_status() fail, as with a crashed process.
  void fail_rank(int rank);
  bool failed(int rank) const;

 private:
  friend class LoopbackTransport;
  struct Message {
    int src;
    uint64_t tag;
    std::vector<uint8_t> payload;
  };
  struct Inbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<Message> messages;
  };
  std::vector<std::unique_ptr<Inbox>> inboxes_;
  std::unique_ptr<std::atomic<bool>[]> failed_;
};

}  // namespace rr::transport
