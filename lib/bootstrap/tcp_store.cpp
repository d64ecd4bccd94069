#include "bootstrap/tcp_store.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bootstrap/encoding.hpp"

namespace rr::bootstrap {
namespace {

using tcp_store::kMaxMessageBytes;
using tcp_store::kRequestHeaderBytes;
using tcp_store::Opcode;
using tcp_store::ReplyStatus;

// Reads beyond what a pending message needs are capped so one client with a
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
  Loop(Socket listener, UniqueFd wake) : listener_(std::move(listener)), wake_(std::move(wake)) {}

  // Serves until request_stop(), then closes every socket.
  void run();
  // Called from the owning thread: makes run() return soon.
  void request_stop();

 private:
  struct Client {
    explicit Client(Socket s) : socket(std::move(s)) {}
    Socket socket;
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
  void accept_new();
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
  std::atomic<bool> stop_{false};
  SocketClock::time_point listener_paused_until_{};

  uint64_t next_id_ = 0;
  std::unordered_map<uint64_t, Client> clients_;
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
    const bool listener_paused = SocketClock::now() < listener_paused_until_;
    fds.push_back({wake_.get(), POLLIN, 0});
    // fd -1 makes poll skip the listener while it backs off.
    fds.push_back({listener_paused ? -1 : listener_.fd(), POLLIN, 0});
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

    const int timeout = listener_paused ? poll_timeout_ms(listener_paused_until_) : -1;
    int ready = poll(fds.data(), fds.size(), timeout);
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
    if (fds[1].revents != 0) accept_new();

    for (size_t i = 0; i < ids.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0) continue;
      auto it = clients_.find(ids[i]);
      if (it == clients_.end()) continue;
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

void TcpStoreServer::Loop::accept_new() {
  for (int i = 0; i < kMaxAcceptsPerTurn; ++i) {
    Socket socket;
    bool accepted = false;
    Status status = accept_tcp(listener_, &socket, &accepted);
    if (!status.ok()) {
      // Typically EMFILE: the pending connection stays queued and the
      // listener stays readable; pause it rather than spin.
      listener_paused_until_ = SocketClock::now() + kAcceptBackoff;
      return;
    }
    if (!accepted) return;
    clients_.emplace(next_id_++, Client(std::move(socket)));
  }
}

void TcpStoreServer::Loop::read_from(Client* client) {
  // Compact first so the buffer holds at most one partial request.
  if (client->input_offset > 0) {
    client->input.erase(client->input.begin(),
                        client->input.begin() + static_cast<ptrdiff_t>(client->input_offset));
    client->input_offset = 0;
  }
  // Read what the pending request still needs, within bounds.
  size_t want = kMinReadBytes;
  if (client->input.size() >= 4) {
    const size_t needed = 4 + static_cast<size_t>(get_u32(client->input.data()));
    if (needed > client->input.size()) want = needed - client->input.size();
  }
  want = std::clamp(want, kMinReadBytes, kMaxReadBytes);
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
}

bool TcpStoreServer::Loop::serve(uint64_t id, Client* client) {
  bool handled = false;
  while (!client->dropped && client->idle()) {
    const size_t available = client->input.size() - client->input_offset;
    if (available < 4) break;
    const uint8_t* frame = client->input.data() + client->input_offset;
    const uint32_t length = get_u32(frame);
    if (length > kMaxMessageBytes || length < kRequestHeaderBytes) {
      drop(id, client);
      break;
    }
    if (available < 4 + static_cast<size_t>(length)) break;  // wait for the rest
    const uint8_t* body = frame + 4;
    const uint8_t opcode = body[0];
    const uint32_t key_length = get_u32(body + 1);
    if (key_length > length - kRequestHeaderBytes ||
        (opcode != static_cast<uint8_t>(Opcode::kSet) &&
         opcode != static_cast<uint8_t>(Opcode::kGet) &&
         opcode != static_cast<uint8_t>(Opcode::kAdd))) {
      drop(id, client);
      break;
    }
    const uint8_t* key = body + kRequestHeaderBytes;
    const uint8_t* value = key + key_length;
    const size_t value_size = length - kRequestHeaderBytes - key_length;
    client->input_offset += 4 + static_cast<size_t>(length);
    handle(id, client, static_cast<Opcode>(opcode),
           std::string(reinterpret_cast<const char*>(key), key_length), value, value_size);
    handled = true;
  }
  if (client->input_offset == client->input.size()) {
    client->input.clear();
    client->input_offset = 0;
  }
  return handled;
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
      if (value_size != 0) {
        drop(id, client);
        return;
      }
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
      if (value_size != 8) {
        drop(id, client);
        return;
      }
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
  }
}

void TcpStoreServer::Loop::reply(Client* client, ReplyStatus status, const uint8_t* payload,
                                 size_t size) {
  // Replies are bounded like requests: values arrived in requests of at most
  // kMaxMessageBytes, and error texts are short.
  append_u32(&client->output, static_cast<uint32_t>(1 + size));
  client->output.push_back(static_cast<uint8_t>(status));
  if (size > 0) client->output.insert(client->output.end(), payload, payload + size);
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
  waiters_.clear();
  listener_.close();
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Loop> loop, uint16_t port)
    : loop_(std::move(loop)), port_(port) {}

Status TcpStoreServer::Start(const std::string& bind_host, uint16_t port,
                             std::unique_ptr<TcpStoreServer>* out) {
  Socket listener;
  uint16_t bound_port = 0;
  RR_RETURN_IF_ERROR(listen_tcp(bind_host, port, &listener, &bound_port));
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return SystemError("eventfd for the store server: " + errno_text(errno));

  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer(
      std::make_unique<Loop>(std::move(listener), std::move(wake)), bound_port));
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

Status TcpStore::Connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                         std::unique_ptr<TcpStore>* out) {
  Socket socket;
  RR_RETURN_IF_ERROR(connect_tcp(host, port, deadline, &socket));
  out->reset(new TcpStore(std::move(socket)));
  return Status::Ok();
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

  std::vector<uint8_t> request;
  request.reserve(4 + body_size);
  append_u32(&request, static_cast<uint32_t>(body_size));
  request.push_back(static_cast<uint8_t>(opcode));
  append_u32(&request, static_cast<uint32_t>(key.size()));
  request.insert(request.end(), key.begin(), key.end());
  if (value_size > 0) request.insert(request.end(), value, value + value_size);

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
