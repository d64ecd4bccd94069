#include "bootstrap/torch_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bootstrap/encoding.hpp"

namespace rr::bootstrap {

namespace {

enum class Query : uint8_t {
  kValidate = 0,
  kSet = 1,
  kGet = 3,
  kAdd = 4,
  kWait = 6,
  kCancelWait = 12,
  kPing = 13,
};
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kStopWaiting = 0;
constexpr uint8_t kWaitCanceled = 1;
// A value larger than this is not a rendezvous record: the stream is off.
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 30;
// How long a torch store may take to answer a PING or a CANCEL_WAIT.
constexpr auto kAnswerLimit = std::chrono::seconds(5);

class Message {
 public:
  explicit Message(Query query) { bytes_.push_back(static_cast<uint8_t>(query)); }
  Message& u32(uint32_t v) {
    append_u32(&bytes_, v);
    return *this;
  }
  Message& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Message& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  Message& bytes(const uint8_t* data, size_t size) {
    u64(size);
    bytes_.insert(bytes_.end(), data, data + size);
    return *this;
  }
  Message& key(const std::string& k) {
    const std::string wire = "/" + k;
    return bytes(reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
  }
  Status send(const Socket& socket, Clock::time_point deadline) const {
    return send_all(socket, bytes_.data(), bytes_.size(), deadline);
  }

 private:
  std::vector<uint8_t> bytes_;
};

Status recv_u64(const Socket& socket, Clock::time_point deadline, uint64_t* v) {
  uint8_t b[8];
  RR_RETURN_IF_ERROR(recv_all(socket, b, sizeof b, deadline));
  *v = static_cast<uint64_t>(get_i64(b));
  return Status::Ok();
}

}  // namespace

template <typename Body>
Status TorchStore::exchange(const std::string& what, Clock::time_point deadline, Body body) {
  std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
  if (!lock.try_lock_until(deadline)) {
    return Timeout(what + " timed out waiting for another call on the connection to torch's store " +
                   socket_.peer());
  }
  if (!broken_.empty()) {
    return RemoteError(what + ": the connection to torch's store " + socket_.peer() +
                       " is unusable after an earlier failure: " + broken_);
  }
  bool intact = false;
  const Status status = body(&intact);
  if (status.ok()) return status;
  const std::string where = what + " on torch's store " + socket_.peer() + ": " + status.message();
  if (intact) return Status(status.code(), where);
  broken_ = status.message();
  socket_.close();
  return Status(status.code(), where + " (the connection is now unusable)");
}

Status TorchStore::Connect(const std::string& host, uint16_t port, Clock::time_point deadline,
                           std::unique_ptr<TorchStore>* out) {
  Socket socket;
  RR_RETURN_IF_ERROR(connect_tcp(host, port, deadline, &socket));
  const uint32_t nonce = static_cast<uint32_t>(::getpid());
  Status status = Message(Query::kValidate).u32(kValidationMagic).send(socket, deadline);
  if (status.ok()) status = Message(Query::kPing).u32(nonce).send(socket, deadline);
  uint8_t answer[4] = {};
  if (status.ok()) status = recv_all(socket, answer, sizeof answer, std::min(deadline, Clock::now() + kAnswerLimit));
  if (status.ok() && get_u32(answer) != nonce) {
    status = RemoteError("answered a PING with " + std::to_string(get_u32(answer)) + ", not " + std::to_string(nonce));
  }
  if (!status.ok()) {
    return Status(status.code(), "no torch.distributed TCPStore answers at " + socket.peer() +
                                     ", where TORCHELASTIC_USE_AGENT_STORE=True says torchrun's agent serves one: " +
                                     status.message());
  }
  out->reset(new TorchStore(std::move(socket)));
  return Status::Ok();
}

Status TorchStore::set(const std::string& key, const Bytes& value) {
  const auto deadline = Clock::now() + kSetTimeout;
  return exchange("set of key " + quote_key(key), deadline, [&](bool*) {
    return Message(Query::kSet).key(key).bytes(value.data(), value.size()).send(socket_, deadline);
  });
}

Status TorchStore::get(const std::string& key, Clock::time_point deadline, Bytes* value) {
  return exchange("get of key " + quote_key(key), deadline, [&](bool* intact) -> Status {
    RR_RETURN_IF_ERROR(Message(Query::kWait).u64(1).key(key).send(socket_, deadline));
    uint8_t response = 0;
    Status waited = recv_all(socket_, &response, 1, deadline);
    if (waited.code() == Code::kTimeout) {
      // Take the parked wait back, so the stream is in step for the next call.
      const auto limit = Clock::now() + kAnswerLimit;
      RR_RETURN_IF_ERROR(Message(Query::kCancelWait).send(socket_, limit));
      RR_RETURN_IF_ERROR(recv_all(socket_, &response, 1, limit));
      if (response == kStopWaiting) RR_RETURN_IF_ERROR(recv_all(socket_, &response, 1, limit));
      if (response != kWaitCanceled) return RemoteError("answered CANCEL_WAIT with " + std::to_string(response));
      *intact = true;
      return Timeout("not set before the deadline");
    }
    RR_RETURN_IF_ERROR(waited);
    if (response != kStopWaiting) return RemoteError("answered WAIT with " + std::to_string(response));
    RR_RETURN_IF_ERROR(Message(Query::kGet).key(key).send(socket_, deadline));
    uint64_t size = 0;
    RR_RETURN_IF_ERROR(recv_u64(socket_, deadline, &size));
    if (size > kMaxValueBytes) return RemoteError("a value of " + std::to_string(size) + " bytes");
    value->resize(size);
    return recv_all(socket_, value->data(), size, deadline);
  });
}

Status TorchStore::add(const std::string& key, int64_t delta, Clock::time_point deadline, int64_t* result) {
  return exchange("add to key " + quote_key(key), deadline, [&](bool*) -> Status {
    RR_RETURN_IF_ERROR(Message(Query::kAdd).key(key).i64(delta).send(socket_, deadline));
    uint64_t v = 0;
    RR_RETURN_IF_ERROR(recv_u64(socket_, deadline, &v));
    *result = static_cast<int64_t>(v);
    return Status::Ok();
  });
}

}  // namespace rr::bootstrap
