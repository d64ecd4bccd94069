#pragma once
// The TCP rendezvous store: a server (normally on rank 0, `tcp://` and `env://`
// init) that holds the key-value map, and a client that implements Store.
//
// The wire protocol is in store_wire.hpp: every connection opens with a HELLO
// carrying the job's secret, then makes SET, GET and ADD requests.
//
// A GET for a missing key is parked: the server answers once some client sets
// (or adds to) the key. It never times out on the server; the client enforces
// its own deadline. A client has at most one request in service at a time, so
// replies come in request order.
//
// Counters are stored as decimal text ("800"), so get() on a counter returns
// that text, as in torch.distributed's stores.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/store_wire.hpp"
#include "common/status.hpp"

namespace rr::bootstrap {

namespace tcp_store {

// Bounds that keep strangers from exhausting the server (or delaying members
// for long). Members are never limited by anything but kMaxConnections.
//
// Connections held at once: every rank of a large job, with room to spare.
constexpr size_t kMaxConnections = 4096;
// Of those, connections that have not yet sent a valid HELLO. When a new one
// would exceed it, the oldest is closed: a member sends its HELLO at once and
// is past this stage within a turn or two of the serving loop, so the oldest
// is nearly always a stranger; a member closed all the same reconnects.
constexpr size_t kMaxUnauthenticated = 256;
// A connection that has not authenticated this long after it was accepted is
// closed: half-open and slow (a byte a second) ones cannot hold a slot longer.
constexpr std::chrono::seconds kAuthDeadline{5};

}  // namespace tcp_store

// What a client proves membership with, and how messages name it.
struct StoreSecret {
  Bytes bytes;       // at most tcp_store::kMaxSecretBytes; empty on a loopback store without one
  std::string name;  // "RR_AUTH_TOKEN", "unique id's secret"
};

class TcpStoreServer {
 public:
  // Listens on `bind_host`:`port` (port 0 = any free port; empty host = all
  // interfaces) and starts the serving thread. Only clients whose HELLO
  // carries `secret` are served.
  [[nodiscard]] static Status Start(const std::string& bind_host, uint16_t port, Bytes secret,
                                    std::unique_ptr<TcpStoreServer>* out);
  // Stops the serving thread and closes the listener and every client
  // connection; clients waiting on a reply see the connection close.
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port actually bound (useful after Start with port 0).
  uint16_t port() const { return port_; }

 private:
  class Loop;  // the poll loop and all state it owns; lives in tcp_store.cpp

  TcpStoreServer(std::unique_ptr<Loop> loop, uint16_t port);

  std::unique_ptr<Loop> loop_;
  uint16_t port_;
  std::thread thread_;
};

// The client: one connection shared by all threads of the process, one
// request at a time. A call that fails mid-exchange (deadline, peer gone,
// garbage reply) leaves the connection unusable, because a late reply would
// otherwise be read as the answer to the next request; every later call then
// fails with kRemoteError saying so.
//
// While one thread's get() waits for its key, other threads' calls on the same
// TcpStore wait behind it (up to their own deadlines). A thread that waits for
// a key which another thread of this process will set needs its own TcpStore.
class TcpStore : public Store {
 public:
  // set() carries no deadline in the Store interface; it gets this one, the
  // default of torch.distributed's TCPStore.
  static constexpr std::chrono::milliseconds kDefaultSetTimeout{300'000};

  // Connects to a TcpStoreServer and authenticates with `secret`, retrying
  // until `deadline` while the server is not up yet or sheds the connection.
  // A server that rejects the secret is kInvalidArgument naming host:port and
  // secret.name, at once.
  [[nodiscard]] static Status Connect(const std::string& host, uint16_t port,
                                      const StoreSecret& secret, Clock::time_point deadline,
                                      std::unique_ptr<TcpStore>* out);

  Status set(const std::string& key, const Bytes& value) override;
  Status get(const std::string& key, Clock::time_point deadline, Bytes* value) override;
  Status add(const std::string& key, int64_t delta, Clock::time_point deadline,
             int64_t* result) override;

  void set_timeout(std::chrono::milliseconds timeout) { set_timeout_ms_ = timeout.count(); }
  // True once a failed exchange has made the connection unusable.
  bool broken() const;

 private:
  class Exchange;  // claims the connection for one request/reply exchange

  explicit TcpStore(Socket socket) : socket_(std::move(socket)) {}

  // Sends one request and reads its reply. Ok means a kOk reply whose payload
  // (of `expected_payload` bytes, when given) is in `*payload`; a
  // kInvalidArgument reply becomes that status with the connection intact;
  // anything else breaks the connection.
  Status round_trip(tcp_store::Opcode opcode, const std::string& key, const uint8_t* value,
                    size_t value_size, Clock::time_point deadline,
                    std::optional<size_t> expected_payload, Bytes* payload);

  // A mutex is held only to claim or release the connection, never across
  // I/O, so waiting for a busy connection can honour a deadline
  // (condition_variable::wait_until on the steady clock).
  mutable std::mutex mutex_;
  std::condition_variable idle_;  // notified when busy_ clears
  bool busy_ = false;             // guarded by mutex_: a thread is mid-exchange
  std::string broken_reason_;     // guarded by mutex_; empty while usable
  Socket socket_;                 // used only by the thread that set busy_
  std::atomic<int64_t> set_timeout_ms_{kDefaultSetTimeout.count()};
};

}  // namespace rr::bootstrap
