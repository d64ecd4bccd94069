#pragma once
// A client of torch.distributed's TCPStore: the store torchrun's agent serves
// at MASTER_ADDR:MASTER_PORT when it exports TORCHELASTIC_USE_AGENT_STORE=True.
// Rank 0 cannot serve a store of its own there (the port is the agent's), so
// env:// and tcp:// at that address use this client on every rank, as torch's
// own rendezvous does.
//
// torch's wire format (its TCPStore client and server; little-endian
// integers, sizes as u64, a string is a u64 length and its bytes):
//
//   VALIDATE  u32 magic 0x3C85F7CE   no reply; a connection's first message
//   PING      u32 nonce              reply: the nonce
//   SET       key, value             no reply
//   GET       key                    reply: value (the key must exist: WAIT first)
//   ADD       key, i64 delta         reply: i64 new value
//   WAIT      u64 n, n keys          reply: u8 STOP_WAITING once all exist
//   CANCEL_WAIT                      reply: u8 WAIT_CANCELED, after a
//                                    STOP_WAITING when the keys came first
//
// torch's client sends every key with a leading "/", and so does this one:
// torch's store.get("k") reads what set("k") wrote here.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/status.hpp"

namespace rr::bootstrap {

class TorchStore : public Store {
 public:
  // torch's default store timeout, for set(), which carries no deadline.
  static constexpr std::chrono::milliseconds kSetTimeout{300'000};

  // Connects (retrying while nothing listens yet, until `deadline`) and
  // checks with a PING that a torch store answers there.
  [[nodiscard]] static Status Connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                                      std::unique_ptr<TorchStore>* out);

  Status set(const std::string& key, const Bytes& value) override;
  Status get(const std::string& key, Clock::time_point deadline, Bytes* value) override;
  Status add(const std::string& key, int64_t delta, Clock::time_point deadline, int64_t* result) override;

 private:
  explicit TorchStore(Socket socket) : socket_(std::move(socket)) {}
  // Claims the connection (waiting for another thread's exchange up to
  // `deadline`) and runs `body`. A failure that leaves the stream at an
  // unknown point (`*intact` false) makes the connection unusable: every
  // later call fails saying why.
  template <typename Body>
  Status exchange(const std::string& what, Clock::time_point deadline, Body body);

  std::timed_mutex mutex_;  // held for a whole exchange; try_lock_until honours deadlines
  std::string broken_;      // guarded by mutex_; empty while usable
  Socket socket_;
};

}  // namespace rr::bootstrap
