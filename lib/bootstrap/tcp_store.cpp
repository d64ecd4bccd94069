#include "bootstrap/tcp_store.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bootstrap/encoding.hpp"
#include "common/log.hpp"

namespace rr::bootstrap {
namespace {

using tcp_store::kAuthDeadline;
using tcp_store::kFrameHeaderBytes;
using tcp_store::kMaxConnections;
using tcp_store::kMaxHelloBytes;
using tcp_store::kMaxMessageBytes;
using tcp_store::kMaxSecretBytes;
using tcp_store::kMaxUnauthenticated;
using tcp_store::kRequestHeaderBytes;
using tcp_store::Opcode;
using tcp_store::ParseResult;
using tcp_store::ReplyStatus;
using tcp_store::Request;

// Reads beyond what a pending message needs are capped so one member with a
// large value cannot starve the others of the loop's attention for long.
constexpr size_t kMinReadBytes = 64 << 10;
constexpr size_t kMaxReadBytes = 1 << 20;
// A listener that fails to accept (out of descriptors) is ignored this long,
// instead of spinning on it.
constexpr std::chrono::milliseconds kAcceptBackoff{100};
// Accepts per loop turn, so a connection storm cannot starve served clients.
constexpr int kMaxAcceptsPerTurn = 64;

}  // namespace

// ---------------------------------------------------------------------------
// Server

// Everything the serving thread touches. Only the thread uses it, except
// request_stop(), which is why the server needs no mutex.
class TcpStoreServer::Loop {
 public:
  Loop(Socket listener, UniqueFd wake, Bytes secret)
      : listener_(std::move(listener)), wake_(std::move(wake)), secret_(std::move(secret)) {}

  // Serves until request_stop(), then closes every socket.
  void run();
  // Called from the owning thread: makes run() return soon.
  void request_stop();

 private:
  struct Client {
    Client(uint64_t client_id, Socket s, SocketClock::time_point deadline)
        : id(client_id), socket(std::move(s)), auth_deadline(deadline) {}
    uint64_t id;
    Socket socket;
    // Until its HELLO carries the secret, a client may send one small message
    // and must do so by auth_deadline; it is listed in unauthenticated_.
    bool authenticated = false;
    SocketClock::time_point auth_deadline;
    bool close_after_flush = false;  // rejected: send the reply, then close
    std::vector<uint8_t> input;  // received bytes; [input_offset, end) not yet handled
    size_t input_offset = 0;
    std::vector<uint8_t> output;  // reply bytes; [output_offset, end) not yet sent
    size_t output_offset = 0;
    bool parked = false;  // a GET is waiting for parked_key
    std::string parked_key;
    bool dropped = false;

    // Ready for its next request: nothing waiting, nothing left to send.
    bool idle() const { return !parked && output_offset == output.size(); }
  };

  void serve_until_stopped();
  // Milliseconds poll() may sleep: until the listener's pause or the oldest
  // stranger's deadline ends, or forever.
  int poll_timeout() const;
  // Whether to poll the listener: not while it backs off, nor while every
  // slot holds a member (the rest wait in the kernel's backlog).
  bool accepting() const;
  void accept_new();
  // Closes and forgets the connection that has waited longest to
  // authenticate, to make room for a newer one.
  void evict_oldest_unauthenticated();
  // Drops the strangers whose time to authenticate is up.
  void expire_unauthenticated();
  // Lets a stranger in on a HELLO with the secret; rejects or drops it otherwise.
  void authenticate(Client* client, const Request& request);
  void read_from(Client* client);
  void flush(Client* client);
  // Handles the complete requests buffered for `client` while it is idle.
  // Returns whether any was handled.
  bool serve(uint64_t id, Client* client);
  void handle(uint64_t id, Client* client, Opcode opcode, std::string key, const uint8_t* value,
              size_t value_size);
  void reply(Client* client, ReplyStatus status, const uint8_t* payload, size_t size);
  // Answers every GET parked on `key`, which now exists.
  void wake_waiters(const std::string& key);
  void drop(uint64_t id, Client* client);
  void close_all();

  Socket listener_;
  UniqueFd wake_;  // eventfd: request_stop() writes it to interrupt poll()
  const Bytes secret_;
  std::atomic<bool> stop_{false};
  SocketClock::time_point listener_paused_until_{};

  uint64_t next_id_ = 0;  // ids grow with accept order and are never reused
  std::unordered_map<uint64_t, Client> clients_;
  // Ids of the clients not yet authenticated; the first is the oldest, whose
  // deadline comes first.
  std::set<uint64_t> unauthenticated_;
  std::unordered_map<std::string, Bytes> values_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> parked client ids
};

void TcpStoreServer::Loop::request_stop() {
  stop_.store(true);
  const uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow, in which
  // case poll() is already woken.
  ssize_t n;
  do {
    n = write(wake_.get(), &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
}

void TcpStoreServer::Loop::run() {
  try {
    serve_until_stopped();
  } catch (const std::exception&) {
    // Out of memory in the loop. Clients must not wait on a server that no
    // longer serves: closing every connection below makes them fail now.
  }
  close_all();
}

void TcpStoreServer::Loop::serve_until_stopped() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;  // [i] = client id behind fds[i + 2]
  while (!stop_.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    // fd -1 makes poll skip the listener while it backs off or is full.
    fds.push_back({accepting() ? listener_.fd() : -1, POLLIN, 0});
    for (auto& [id, client] : clients_) {
      // Read only from idle clients: that bounds what one client can make us
      // buffer to one request. Otherwise watch for hang-up, and for room to
      // send when a reply is pending.
      short events = POLLRDHUP;
      if (client.idle()) events |= POLLIN;
      if (client.output_offset < client.output.size()) events |= POLLOUT;
      fds.push_back({client.socket.fd(), events, 0});
      ids.push_back(id);
    }

    int ready = poll(fds.data(), fds.size(), poll_timeout());
    if (ready < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOMEM) {
        // The kernel could not allocate poll's tables: try again shortly.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      return;  // EFAULT/EINVAL: a bug; close everything so clients fail fast
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!read(wake_.get(), &count, sizeof(count));
      if (stop_.load()) return;
    }
    expire_unauthenticated();
    if (fds[1].revents != 0) accept_new();

    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      auto it = clients_.find(ids[i]);
      if (it == clients_.end() || it->second.dropped) continue;
      Client& client = it->second;
      if (revents & (POLLERR | POLLNVAL)) {
        drop(ids[i], &client);
        continue;
      }
      if (revents & POLLOUT) flush(&client);
      if (!client.dropped && (revents & POLLIN)) {
        read_from(&client);
      } else if (!client.dropped && (revents & (POLLHUP | POLLRDHUP))) {
        // Gone while parked or while we owed it a reply: nobody to answer.
        drop(ids[i], &client);
      }
    }

    // Serve until no client can make progress: a SET may unpark GETs, whose
    // clients may have further requests buffered.
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& [id, client] : clients_) {
        if (!client.dropped && serve(id, &client)) progress = true;
      }
    }
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (!it->second.dropped) {
        ++it;
        continue;
      }
      drop(it->first, &it->second);  // forgets a parked GET, if any
      it = clients_.erase(it);
    }
  }
}

int TcpStoreServer::Loop::poll_timeout() const {
  std::optional<SocketClock::time_point> wake_at;
  if (SocketClock::now() < listener_paused_until_) wake_at = listener_paused_until_;
  if (!unauthenticated_.empty()) {
    const auto oldest = clients_.at(*unauthenticated_.begin()).auth_deadline;
    if (!wake_at || oldest < *wake_at) wake_at = oldest;
  }
  return wake_at ? poll_timeout_ms(*wake_at) : -1;
}

bool TcpStoreServer::Loop::accepting() const {
  if (SocketClock::now() < listener_paused_until_) return false;
  return clients_.size() < kMaxConnections || !unauthenticated_.empty();
}

void TcpStoreServer::Loop::accept_new() {
  for (int i = 0; i < kMaxAcceptsPerTurn; ++i) {
    if (clients_.size() >= kMaxConnections && unauthenticated_.empty()) return;
    Socket socket;
    bool accepted = false;
    Status status = accept_tcp(listener_, &socket, &accepted);
    if (!status.ok()) {
      // Typically EMFILE: the pending connection stays queued and the
      // listener stays readable. Free a descriptor held by a stranger if
      // there is one; else pause the listener rather than spin.
      if (!unauthenticated_.empty()) {
        evict_oldest_unauthenticated();
      } else {
        listener_paused_until_ = SocketClock::now() + kAcceptBackoff;
      }
      return;
    }
    if (!accepted) return;
    const uint64_t id = next_id_++;
    clients_.emplace(id, Client(id, std::move(socket), SocketClock::now() + kAuthDeadline));
    unauthenticated_.insert(id);
    // The newcomer has the largest id, so it is never the one evicted here
    // while another stranger remains.
    if (unauthenticated_.size() > kMaxUnauthenticated || clients_.size() > kMaxConnections) {
      evict_oldest_unauthenticated();
    }
  }
}

void TcpStoreServer::Loop::evict_oldest_unauthenticated() {
  const uint64_t id = *unauthenticated_.begin();
  auto it = clients_.find(id);
  RR_LOG(LogLevel::kTrace, "store %s: closed %s, the oldest of %zu connections yet to send HELLO",
         listener_.peer().c_str(), it->second.socket.peer().c_str(), unauthenticated_.size());
  drop(id, &it->second);
  // Erased now, not at the end of the turn, so the slot is free at once;
  // this turn's poll results find the id gone and skip it.
  clients_.erase(it);
}

void TcpStoreServer::Loop::expire_unauthenticated() {
  const auto now = SocketClock::now();
  while (!unauthenticated_.empty()) {
    Client& oldest = clients_.at(*unauthenticated_.begin());
    if (oldest.auth_deadline > now) return;
    RR_LOG(LogLevel::kTrace, "store %s: closed %s, which sent no HELLO within %lld s",
           listener_.peer().c_str(), oldest.socket.peer().c_str(),
           static_cast<long long>(kAuthDeadline.count()));
    drop(oldest.id, &oldest);  // leaves unauthenticated_; erased at the end of the turn
  }
}

void TcpStoreServer::Loop::read_from(Client* client) {
  // Compact first so the buffer holds at most one partial request.
  if (client->input_offset > 0) {
    client->input.erase(client->input.begin(),
                        client->input.begin() + static_cast<ptrdiff_t>(client->input_offset));
    client->input_offset = 0;
  }
  size_t want;
  if (!client->authenticated) {
    // A stranger gets room for one HELLO, no more.
    const size_t limit = kFrameHeaderBytes + kMaxHelloBytes;
    if (client->input.size() >= limit) return;  // serve() decides on what is there
    want = limit - client->input.size();
  } else {
    // Read what the pending request still needs, within bounds.
    want = kMinReadBytes;
    if (client->input.size() >= kFrameHeaderBytes) {
      const size_t needed = kFrameHeaderBytes + static_cast<size_t>(get_u32(client->input.data()));
      if (needed > client->input.size()) want = needed - client->input.size();
    }
    want = std::clamp(want, kMinReadBytes, kMaxReadBytes);
  }
  const size_t old_size = client->input.size();
  client->input.resize(old_size + want);
  ssize_t n;
  do {
    n = recv(client->socket.fd(), client->input.data() + old_size, want, 0);
  } while (n < 0 && errno == EINTR);
  client->input.resize(old_size + (n > 0 ? static_cast<size_t>(n) : 0));
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
    client->dropped = true;  // closed or failed; erased at the end of the turn
  }
}

void TcpStoreServer::Loop::flush(Client* client) {
  while (client->output_offset < client->output.size()) {
    ssize_t n = send(client->socket.fd(), client->output.data() + client->output_offset,
                     client->output.size() - client->output_offset, MSG_NOSIGNAL);
    if (n > 0) {
      client->output_offset += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // poll for POLLOUT
    client->dropped = true;
    return;
  }
  client->output.clear();
  client->output_offset = 0;
  if (client->close_after_flush) drop(client->id, client);
}

bool TcpStoreServer::Loop::serve(uint64_t id, Client* client) {
  bool handled = false;
  while (!client->dropped && client->idle() && !client->close_after_flush) {
    const uint8_t* data = client->input.data() + client->input_offset;
    const size_t available = client->input.size() - client->input_offset;
    Request request;
    std::string error;
    const uint32_t limit = client->authenticated ? kMaxMessageBytes : kMaxHelloBytes;
    const ParseResult parsed = tcp_store::parse_request(data, available, limit, &request, &error);
    if (parsed == ParseResult::kIncomplete) break;  // wait for the rest
    if (parsed == ParseResult::kMalformed) {
      RR_LOG(LogLevel::kTrace, "store %s: dropped %s: %s", listener_.peer().c_str(),
             client->socket.peer().c_str(), error.c_str());
      drop(id, client);
      break;
    }
    client->input_offset += request.frame_bytes;
    handled = true;
    if (!client->authenticated) {
      authenticate(client, request);
    } else if (request.opcode == Opcode::kHello) {
      drop(id, client);  // a member has nothing left to prove: a confused peer
    } else {
      handle(id, client, request.opcode, std::string(request.key), request.value, request.value_size);
    }
  }
  if (client->input_offset == client->input.size()) {
    client->input.clear();
    client->input_offset = 0;
  }
  return handled;
}

void TcpStoreServer::Loop::authenticate(Client* client, const Request& request) {
  if (request.opcode != Opcode::kHello) {
    RR_LOG(LogLevel::kTrace, "store %s: dropped %s, whose first request was not HELLO",
           listener_.peer().c_str(), client->socket.peer().c_str());
    drop(client->id, client);  // not one of ours: no answer
    return;
  }
  if (tcp_store::secrets_equal(secret_.data(), secret_.size(), request.value, request.value_size)) {
    unauthenticated_.erase(client->id);
    client->authenticated = true;
    reply(client, ReplyStatus::kOk, nullptr, 0);
    return;
  }
  // A rank of this job with the wrong secret, most likely: say so, so that it
  // fails at once and names the secret instead of timing out. It stays a
  // stranger, so the deadline bounds how long the reply may wait to be read.
  RR_LOG(LogLevel::kTrace, "store %s: rejected %s, whose HELLO carries the wrong secret",
         listener_.peer().c_str(), client->socket.peer().c_str());
  client->close_after_flush = true;
  reply(client, ReplyStatus::kUnauthorized, nullptr, 0);
}

void TcpStoreServer::Loop::handle(uint64_t id, Client* client, Opcode opcode, std::string key,
                                  const uint8_t* value, size_t value_size) {
  switch (opcode) {
    case Opcode::kSet: {
      values_[key] = Bytes(value, value + value_size);
      reply(client, ReplyStatus::kOk, nullptr, 0);
      wake_waiters(key);
      return;
    }
    case Opcode::kGet: {
      auto it = values_.find(key);
      if (it != values_.end()) {
        reply(client, ReplyStatus::kOk, it->second.data(), it->second.size());
        return;
      }
      // Park: answered by wake_waiters() when the key appears.
      client->parked = true;
      client->parked_key = key;
      waiters_[std::move(key)].push_back(id);
      return;
    }
    case Opcode::kAdd: {
      // parse_request saw to it that the value is the 8-byte delta.
      auto it = values_.find(key);
      int64_t result = 0;
      Status status =
          add_to_counter(key, it == values_.end() ? nullptr : &it->second, get_i64(value), &result);
      if (!status.ok()) {
        const std::string& error = status.message();
        reply(client, ReplyStatus::kInvalidArgument,
              reinterpret_cast<const uint8_t*>(error.data()), error.size());
        return;
      }
      values_[key] = counter_text(result);
      uint8_t payload[8];
      put_i64(payload, result);
      reply(client, ReplyStatus::kOk, payload, sizeof(payload));
      wake_waiters(key);
      return;
    }
    case Opcode::kHello:
      drop(id, client);  // serve() never passes one here
      return;
  }
}

void TcpStoreServer::Loop::reply(Client* client, ReplyStatus status, const uint8_t* payload,
                                 size_t size) {
  // Replies are bounded like requests: values arrived in requests of at most
  // kMaxMessageBytes, and error texts are short.
  tcp_store::append_reply(&client->output, status, payload, size);
  flush(client);  // most replies fit the socket buffer: no extra poll turn
}

void TcpStoreServer::Loop::wake_waiters(const std::string& key) {
  auto waiting = waiters_.find(key);
  if (waiting == waiters_.end()) return;
  const std::vector<uint64_t> ids = std::move(waiting->second);
  waiters_.erase(waiting);
  const Bytes& value = values_[key];
  for (uint64_t id : ids) {
    auto it = clients_.find(id);
    if (it == clients_.end() || it->second.dropped || !it->second.parked) continue;
    it->second.parked = false;
    it->second.parked_key.clear();
    reply(&it->second, ReplyStatus::kOk, value.data(), value.size());
  }
}

void TcpStoreServer::Loop::drop(uint64_t id, Client* client) {
  unauthenticated_.erase(id);
  if (client->parked) {
    auto waiting = waiters_.find(client->parked_key);
    if (waiting != waiters_.end()) {
      auto& ids = waiting->second;
      ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
      if (ids.empty()) waiters_.erase(waiting);
    }
    client->parked = false;
  }
  client->dropped = true;
  client->socket.close();  // the client sees EOF now, not when we get round to erasing
}

void TcpStoreServer::Loop::close_all() {
  clients_.clear();
  unauthenticated_.clear();
  waiters_.clear();
  listener_.close();
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Loop> loop, uint16_t port)
    : loop_(std::move(loop)), port_(port) {}

Status TcpStoreServer::Start(const std::string& bind_host, uint16_t port, Bytes secret,
                             std::unique_ptr<TcpStoreServer>* out) {
  if (secret.size() > kMaxSecretBytes) {
    return InvalidArgument("store secret of " + std::to_string(secret.size()) +
                           " bytes: at most " + std::to_string(kMaxSecretBytes));
  }
  Socket listener;
  uint16_t bound_port = 0;
  RR_RETURN_IF_ERROR(listen_tcp(bind_host, port, &listener, &bound_port));
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return SystemError("eventfd for the store server: " + errno_text(errno));

  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer(
      std::make_unique<Loop>(std::move(listener), std::move(wake), std::move(secret)), bound_port));
  Loop* loop = server->loop_.get();
  try {
    server->thread_ = std::thread([loop] { loop->run(); });
  } catch (const std::system_error& e) {
    return SystemError(std::string("cannot start the store server thread: ") + e.what());
  }
  *out = std::move(server);
  return Status::Ok();
}

TcpStoreServer::~TcpStoreServer() {
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------------------
// Client

// Marks the connection busy for one exchange and idle again at scope exit.
class TcpStore::Exchange {
 public:
  explicit Exchange(TcpStore* store) : store_(store) {}
  ~Exchange() {
    if (!claimed_) return;
    {
      std::lock_guard<std::mutex> lock(store_->mutex_);
      store_->busy_ = false;
    }
    store_->idle_.notify_one();
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Waits until no other thread is mid-exchange, or `deadline`. Nothing has
  // been sent when this fails, so the connection stays usable.
  Status claim(const std::string& what, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(store_->mutex_);
    if (!store_->idle_.wait_until(lock, deadline, [this] { return !store_->busy_; })) {
      return Timeout(what + " timed out waiting for another call on the connection to store " +
                     store_->socket_.peer());
    }
    if (!store_->broken_reason_.empty()) {
      return RemoteError(what + ": the connection to store " + store_->socket_.peer() +
                         " is unusable after an earlier failure: " + store_->broken_reason_);
    }
    store_->busy_ = true;
    claimed_ = true;
    return Status::Ok();
  }

 private:
  TcpStore* store_;
  bool claimed_ = false;
};

namespace {

// How long a HELLO may wait for its answer. The serving loop answers at once;
// this leaves room for a loaded host.
constexpr auto kHelloAnswerLimit = std::chrono::seconds(5);

// Sends the HELLO on a fresh connection and reads the answer. Sets `*shed`
// when the server closed the connection without answering: it sheds its
// oldest strangers when too many arrive at once, so another connection is
// worth a try.
Status say_hello(const Socket& socket, const Bytes& hello, const StoreSecret& secret,
                 Clock::time_point deadline, bool* shed) {
  Status status = send_all(socket, hello.data(), hello.size(), deadline);
  uint8_t reply[kFrameHeaderBytes + 1];
  // A store answers HELLO as soon as its loop reads it. A listener that
  // stays silent is another program on the port (rank 0 then failed to
  // listen there): say so now rather than at the deadline.
  const auto answer_by = std::min(deadline, Clock::now() + kHelloAnswerLimit);
  if (status.ok()) status = recv_all(socket, reply, sizeof(reply), answer_by);
  if (status.code() == Code::kTimeout && answer_by < deadline) {
    return SystemError("HELLO to store " + socket.peer() + ": no answer within " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kHelloAnswerLimit).count()) +
                       " s: the port is in use by another process, not by a ringreduce rendezvous (" +
                       status.message() + ")");
  }
  if (!status.ok()) {
    *shed = status.code() == Code::kRemoteError;
    return Status(status.code(), "HELLO to store " + socket.peer() + ": " + status.message());
  }
  const uint32_t length = get_u32(reply);
  const uint8_t answer = reply[kFrameHeaderBytes];
  if (length == 1 && answer == static_cast<uint8_t>(ReplyStatus::kOk)) return Status::Ok();
  if (length == 1 && answer == static_cast<uint8_t>(ReplyStatus::kUnauthorized)) {
    return InvalidArgument("rendezvous at " + socket.peer() + " rejected this rank's " + secret.name);
  }
  return RemoteError("store " + socket.peer() + " answered HELLO with length " + std::to_string(length) +
                     " and status " + std::to_string(answer) + ": not a ringreduce store of this version");
}

}  // namespace

Status TcpStore::Connect(const std::string& host, uint16_t port, const StoreSecret& secret,
                         Clock::time_point deadline, std::unique_ptr<TcpStore>* out) {
  if (secret.bytes.size() > kMaxSecretBytes) {
    return InvalidArgument(secret.name + " is " + std::to_string(secret.bytes.size()) +
                           " bytes long: at most " + std::to_string(kMaxSecretBytes));
  }
  const Bytes hello =
      tcp_store::encode_request(Opcode::kHello, {}, secret.bytes.data(), secret.bytes.size());
  for (int attempts = 1;; ++attempts) {
    Socket socket;
    RR_RETURN_IF_ERROR(connect_tcp(host, port, deadline, &socket));
    bool shed = false;
    Status status = say_hello(socket, hello, secret, deadline, &shed);
    if (status.ok()) {
      out->reset(new TcpStore(std::move(socket)));
      return Status::Ok();
    }
    if (!shed) return status;
    const auto now = Clock::now();
    if (now >= deadline) {
      return Timeout(status.message() + " (" + std::to_string(attempts) +
                     " connections closed unanswered before the deadline)");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(connect_retry_pause(), deadline - now));
  }
}

bool TcpStore::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !broken_reason_.empty();
}

Status TcpStore::round_trip(Opcode opcode, const std::string& key, const uint8_t* value,
                            size_t value_size, Clock::time_point deadline,
                            std::optional<size_t> expected_payload, Bytes* payload) {
  const char* verb = opcode == Opcode::kSet ? "set" : opcode == Opcode::kGet ? "get" : "add";
  const std::string what = std::string(verb) + " of key " + quote_key(key);

  const uint64_t body_size = uint64_t{kRequestHeaderBytes} + key.size() + value_size;
  if (body_size > kMaxMessageBytes) {
    return InvalidArgument(what + ": key and value take " + std::to_string(body_size) +
                           " bytes, more than the store's limit of " +
                           std::to_string(kMaxMessageBytes));
  }

  Exchange exchange(this);
  RR_RETURN_IF_ERROR(exchange.claim(what, deadline));
  // From here this thread alone uses socket_.

  const std::vector<uint8_t> request = tcp_store::encode_request(opcode, key, value, value_size);

  // Any failure from here on leaves the stream at an unknown point: record
  // why, and close the socket so the server drops whatever it parked for us.
  auto fail = [&](const Status& cause) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      broken_reason_ = cause.message();
    }
    socket_.close();
    return Status(cause.code(), what + " on store " + socket_.peer() + ": " + cause.message() +
                                    " (the connection is now unusable)");
  };
  Status status = send_all(socket_, request.data(), request.size(), deadline);
  if (!status.ok()) return fail(status);

  uint8_t header[4];
  status = recv_all(socket_, header, sizeof(header), deadline);
  if (!status.ok()) return fail(status);
  const uint32_t length = get_u32(header);
  if (length < 1 || length > kMaxMessageBytes) {
    return fail(RemoteError("reply length " + std::to_string(length) + " out of bounds"));
  }
  Bytes reply(length);
  status = recv_all(socket_, reply.data(), reply.size(), deadline);
  if (!status.ok()) return fail(status);

  const uint8_t reply_status = reply[0];
  if (reply_status == static_cast<uint8_t>(ReplyStatus::kInvalidArgument)) {
    // A well-formed refusal: the stream is still in step.
    return InvalidArgument(what + " on store " + socket_.peer() + ": " +
                           std::string(reply.begin() + 1, reply.end()));
  }
  if (reply_status != static_cast<uint8_t>(ReplyStatus::kOk)) {
    return fail(RemoteError("unknown reply status " + std::to_string(reply_status)));
  }
  if (expected_payload && reply.size() - 1 != *expected_payload) {
    // A server that answers with the wrong shape cannot be trusted with the
    // next request either.
    return fail(RemoteError("reply carries " + std::to_string(reply.size() - 1) +
                            " bytes, expected " + std::to_string(*expected_payload)));
  }
  reply.erase(reply.begin());
  *payload = std::move(reply);
  return Status::Ok();
}

Status TcpStore::set(const std::string& key, const Bytes& value) {
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(set_timeout_ms_.load(std::memory_order_relaxed));
  Bytes payload;
  return round_trip(Opcode::kSet, key, value.data(), value.size(), deadline, 0, &payload);
}

Status TcpStore::get(const std::string& key, Clock::time_point deadline, Bytes* value) {
  return round_trip(Opcode::kGet, key, nullptr, 0, deadline, std::nullopt, value);
}

Status TcpStore::add(const std::string& key, int64_t delta, Clock::time_point deadline,
                     int64_t* result) {
  uint8_t encoded[8];
  put_i64(encoded, delta);
  Bytes payload;
  RR_RETURN_IF_ERROR(
      round_trip(Opcode::kAdd, key, encoded, sizeof(encoded), deadline, 8, &payload));
  *result = get_i64(payload.data());
  return Status::Ok();
}

}  // namespace rr::bootstrap
