// The rendezvous stores: TcpStore (+ TcpStoreServer) and FileStore.
//
// StoreContract runs the Store interface's promises against both stores; the
// TcpStore and FileStore suites cover what only one of them has (a server
// that must survive bad clients and strangers, a file that may be corrupt,
// several processes on one file); StoreWire the TCP store's request parser.
// Loopback and a private temp directory only.

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/encoding.hpp"
#include "bootstrap/file_store.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "common/status.hpp"

namespace rr::bootstrap {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: the test machine has two cores shared with compilers. Tests that
// expect success never come near it; tests that expect a timeout use short
// deadlines of their own.
constexpr seconds kPatience{30};
const std::string kLoopback = "127.0.0.1";

Clock::time_point soon(milliseconds ms) { return Clock::now() + ms; }
Clock::time_point patient() { return Clock::now() + kPatience; }

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }

// The secret every test server is started with, and its members show.
const StoreSecret kSecret{bytes_of("store-test secret"), "test secret"};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Holds threads at the line until go(), so that they really run at the same
// time instead of one after another as they are created.
class StartingLine {
 public:
  void wait() const {
    while (!go_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void go() { go_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> go_{false};
};

// A directory of our own under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rr-store-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// The Store contract, for both stores.

enum class StoreKind { kTcp, kFile };

class StoreContract : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == StoreKind::kTcp) {
      Status status = TcpStoreServer::Start(kLoopback, 0, kSecret.bytes, &server_);
      ASSERT_TRUE(status.ok()) << status.message();
    } else {
      ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
      file_path_ = dir_.path() + "/store";
    }
  }

  // A fresh client of the store under test: its own connection or its own
  // open file description.
  std::unique_ptr<Store> client() {
    if (GetParam() == StoreKind::kTcp) {
      std::unique_ptr<TcpStore> store;
      Status status = TcpStore::Connect(kLoopback, server_->port(), kSecret, patient(), &store);
      EXPECT_TRUE(status.ok()) << status.message();
      return store;
    }
    std::unique_ptr<FileStore> store;
    Status status = FileStore::Open(file_path_, &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

  TempDir dir_;
  std::string file_path_;
  std::unique_ptr<TcpStoreServer> server_;
};

TEST_P(StoreContract, SetThenGetRoundTripsEmptySmallAndOneMebibyteValues) {
  auto writer = client();
  auto reader = client();
  ASSERT_TRUE(writer && reader);

  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + 7);
  const std::string binary_key("key\0with-nul", 12);

  ASSERT_TRUE(writer->set("small", bytes_of("hello")).ok());
  ASSERT_TRUE(writer->set("empty", Bytes{}).ok());
  ASSERT_TRUE(writer->set("big", big).ok());
  ASSERT_TRUE(writer->set(binary_key, bytes_of("nul")).ok());

  Bytes value = bytes_of("stale");
  Status status = reader->get("small", patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("hello"));

  value = bytes_of("stale");
  status = reader->get("empty", patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(value.empty());

  status = reader->get("big", patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, big);

  status = reader->get(binary_key, patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("nul"));

  // The writer reads its own writes too.
  status = writer->get("small", patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("hello"));
}

TEST_P(StoreContract, LaterSetReplacesValue) {
  auto first = client();
  auto second = client();
  auto reader = client();
  ASSERT_TRUE(first && second && reader);
  Bytes value;
  ASSERT_TRUE(first->set("k", bytes_of("one")).ok());
  ASSERT_TRUE(reader->get("k", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("one"));
  ASSERT_TRUE(second->set("k", bytes_of("two")).ok());
  ASSERT_TRUE(reader->get("k", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("two"));
}

TEST_P(StoreContract, GetWaitsUntilAnotherThreadSetsTheKey) {
  auto reader = client();
  auto writer = client();
  ASSERT_TRUE(reader && writer);
  std::atomic<bool> about_to_set{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    about_to_set = true;
    EXPECT_TRUE(writer->set("late", bytes_of("arrived")).ok());
  });
  Bytes value;
  Status status = reader->get("late", patient(), &value);
  // The get can only have succeeded by waiting for the set.
  EXPECT_TRUE(about_to_set.load());
  setter.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("arrived"));
}

TEST_P(StoreContract, GetWakesWhenAnotherClientAddsToTheKey) {
  auto reader = client();
  auto adder = client();
  ASSERT_TRUE(reader && adder);
  std::thread add_later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    int64_t result = 0;
    EXPECT_TRUE(adder->add("counter", 41, patient(), &result).ok());
    EXPECT_EQ(result, 41);
  });
  Bytes value;
  Status status = reader->get("counter", patient(), &value);
  add_later.join();
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("41"));  // counters are decimal text
}

TEST_P(StoreContract, GetOfMissingKeyTimesOutAtTheDeadlineNamingTheKey) {
  auto store = client();
  ASSERT_TRUE(store);
  const auto deadline = soon(milliseconds(200));
  Bytes value = bytes_of("untouched");
  Status status = store->get("missing/key-42", deadline, &value);
  EXPECT_EQ(status.code(), Code::kTimeout) << status.message();
  EXPECT_TRUE(contains(status.message(), "missing/key-42")) << status.message();
  EXPECT_GE(Clock::now(), deadline);           // did not give up early
  EXPECT_EQ(value, bytes_of("untouched"));     // out-parameter written only on success
}

// 8 threads x 100 increments, each thread with its own client: every result
// 1..800 must come back exactly once, or two increments were not atomic.
TEST_P(StoreContract, AddFromEightClientsOnEightThreadsCountsExactly) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100;
  std::vector<std::unique_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.push_back(client());
    ASSERT_TRUE(clients.back());
  }
  std::vector<std::vector<int64_t>> results(kThreads);
  std::vector<std::thread> threads;
  StartingLine line;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      line.wait();
      for (int i = 0; i < kIncrements; ++i) {
        int64_t result = -1;
        Status status = clients[t]->add("hits", 1, patient(), &result);
        EXPECT_TRUE(status.ok()) << status.message();
        results[t].push_back(result);
      }
    });
  }
  line.go();
  for (auto& thread : threads) thread.join();

  std::vector<int64_t> all;
  for (const auto& r : results) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kIncrements);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);

  int64_t total = -1;
  ASSERT_TRUE(clients[0]->add("hits", 0, patient(), &total).ok());
  EXPECT_EQ(total, kThreads * kIncrements);
  Bytes text;
  ASSERT_TRUE(clients[1]->get("hits", patient(), &text).ok());
  EXPECT_EQ(text, bytes_of("800"));
}

// The same through one client shared by all threads: its lock must serialise.
TEST_P(StoreContract, AddFromEightThreadsSharingOneClientCountsExactly) {
  auto shared = client();
  ASSERT_TRUE(shared);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  StartingLine line;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      line.wait();
      for (int i = 0; i < 100; ++i) {
        int64_t result = 0;
        if (!shared->add("shared", 1, patient(), &result).ok()) ++failures;
      }
    });
  }
  line.go();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  int64_t total = -1;
  ASSERT_TRUE(shared->add("shared", 0, patient(), &total).ok());
  EXPECT_EQ(total, 800);
}

TEST_P(StoreContract, AddStartsAtZeroAndTakesNegativeDeltas) {
  auto store = client();
  ASSERT_TRUE(store);
  int64_t result = 0;
  ASSERT_TRUE(store->add("c", -5, patient(), &result).ok());
  EXPECT_EQ(result, -5);
  ASSERT_TRUE(store->add("c", 7, patient(), &result).ok());
  EXPECT_EQ(result, 2);
}

TEST_P(StoreContract, AddToNonIntegerOrOverflowingValueIsInvalidArgumentAndHarmless) {
  auto store = client();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->set("text", bytes_of("abc")).ok());
  int64_t result = 12345;
  Status status = store->add("text", 1, patient(), &result);
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
  EXPECT_TRUE(contains(status.message(), "text")) << status.message();
  EXPECT_EQ(result, 12345);

  ASSERT_TRUE(store->set("big", bytes_of(std::to_string(INT64_MAX))).ok());
  status = store->add("big", 1, patient(), &result);
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();

  // The store (and, for TCP, the connection) still works.
  Bytes value;
  ASSERT_TRUE(store->get("text", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("abc"));
  ASSERT_TRUE(store->add("fine", 3, patient(), &result).ok());
  EXPECT_EQ(result, 3);
}

INSTANTIATE_TEST_SUITE_P(BothStores, StoreContract,
                         ::testing::Values(StoreKind::kTcp, StoreKind::kFile),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           return info.param == StoreKind::kTcp ? "Tcp" : "File";
                         });

// ---------------------------------------------------------------------------
// TcpStore and its server

// A request frame with every field under the test's control.
Bytes frame(uint32_t length, uint8_t opcode, uint32_t key_length, const std::string& key,
            const Bytes& value = {}) {
  // Sized once and filled in place: GCC 12 warns, wrongly, about inserting an
  // empty key into a vector that has just grown.
  const size_t header = 4 + tcp_store::kRequestHeaderBytes;
  Bytes out(header + key.size() + value.size());
  put_u32(out.data(), length);
  out[4] = opcode;
  put_u32(out.data() + 5, key_length);
  if (!key.empty()) std::memcpy(out.data() + header, key.data(), key.size());
  if (!value.empty()) std::memcpy(out.data() + header + key.size(), value.data(), value.size());
  return out;
}

Bytes well_formed(tcp_store::Opcode opcode, const std::string& key, const Bytes& value = {}) {
  return frame(static_cast<uint32_t>(tcp_store::kRequestHeaderBytes + key.size() + value.size()),
               static_cast<uint8_t>(opcode), static_cast<uint32_t>(key.size()), key, value);
}

Bytes hello_frame(const Bytes& secret) { return well_formed(tcp_store::Opcode::kHello, "", secret); }

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status status = TcpStoreServer::Start(kLoopback, 0, kSecret.bytes, &server_);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_NE(server_->port(), 0);
  }

  std::unique_ptr<TcpStore> connect() {
    std::unique_ptr<TcpStore> store;
    Status status = TcpStore::Connect(kLoopback, server_->port(), kSecret, patient(), &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

  // A connection that has not said HELLO.
  Socket raw_stranger() {
    Socket socket;
    Status status = connect_tcp(kLoopback, server_->port(), patient(), &socket);
    EXPECT_TRUE(status.ok()) << status.message();
    return socket;
  }

  // A connection past its HELLO, for speaking the protocol byte by byte.
  Socket raw_connect() {
    Socket socket = raw_stranger();
    const Bytes hello = hello_frame(kSecret.bytes);
    EXPECT_TRUE(send_all(socket, hello.data(), hello.size(), patient()).ok());
    uint8_t reply[5] = {};
    EXPECT_TRUE(recv_all(socket, reply, sizeof(reply), patient()).ok());
    EXPECT_EQ(get_u32(reply), 1u);
    EXPECT_EQ(reply[4], static_cast<uint8_t>(tcp_store::ReplyStatus::kOk));
    return socket;
  }

  // True when the server closes `socket` (EOF or reset) within kPatience.
  static bool server_hung_up(const Socket& socket) {
    uint8_t byte;
    Status status = recv_all(socket, &byte, 1, patient());
    return status.code() == Code::kRemoteError;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreTest, ThirtyTwoClientsExchangeKeysThroughOneServer) {
  constexpr int kClients = 32;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int rank = 0; rank < kClients; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<TcpStore> store;
      if (!TcpStore::Connect(kLoopback, server_->port(), kSecret, patient(), &store).ok()) {
        ++failures;
        return;
      }
      if (!store->set("addr/" + std::to_string(rank), bytes_of("rank" + std::to_string(rank)))
               .ok()) {
        ++failures;
      }
      int64_t arrived = 0;
      if (!store->add("arrived", 1, patient(), &arrived).ok()) ++failures;
      // Everyone reads everyone's key, most of them before they are set.
      for (int peer = 0; peer < kClients; ++peer) {
        Bytes value;
        Status status = store->get("addr/" + std::to_string(peer), patient(), &value);
        if (!status.ok() || value != bytes_of("rank" + std::to_string(peer))) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  auto check = connect();
  ASSERT_TRUE(check);
  int64_t arrived = 0;
  ASSERT_TRUE(check->add("arrived", 0, patient(), &arrived).ok());
  EXPECT_EQ(arrived, kClients);
}

TEST_F(TcpStoreTest, BadClientsAreDroppedWithoutDisturbingOthers) {
  auto good = connect();
  ASSERT_TRUE(good);
  ASSERT_TRUE(good->set("before", bytes_of("1")).ok());

  // A GET parked for a key, whose client then disappears.
  Socket parked_then_gone = raw_connect();
  const Bytes get_later = well_formed(tcp_store::Opcode::kGet, "later");
  ASSERT_TRUE(send_all(parked_then_gone, get_later.data(), get_later.size(), patient()).ok());

  // Each of these gets its sender dropped.
  const std::vector<std::pair<std::string, Bytes>> garbage = {
      {"unknown opcode", frame(9, 0x7f, 4, "oops")},
      {"oversized length", frame(0xffffffffu, 1, 1, "k")},
      {"just above the limit", frame(tcp_store::kMaxMessageBytes + 1, 1, 1, "k")},
      {"shorter than its header", frame(2, 1, 0, "")},
      {"key past the end", frame(9, 1, 1000, "abcd")},
      {"GET with a value", well_formed(tcp_store::Opcode::kGet, "k", bytes_of("v"))},
      {"ADD without a delta", well_formed(tcp_store::Opcode::kAdd, "k", bytes_of("1"))},
      {"ASCII noise", bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
      {"a second HELLO", hello_frame(kSecret.bytes)},
  };
  for (const auto& [what, bytes] : garbage) {
    SCOPED_TRACE(what);
    Socket bad = raw_connect();
    ASSERT_TRUE(send_all(bad, bytes.data(), bytes.size(), patient()).ok());
    EXPECT_TRUE(server_hung_up(bad));
  }

  // Half a message, then gone; half a message, then silence (still connected).
  Socket half_then_gone = raw_connect();
  Bytes set_frame = well_formed(tcp_store::Opcode::kSet, "half", bytes_of("value"));
  ASSERT_TRUE(send_all(half_then_gone, set_frame.data(), 7, patient()).ok());
  half_then_gone.close();
  Socket half_then_silent = raw_connect();
  ASSERT_TRUE(send_all(half_then_silent, set_frame.data(), 7, patient()).ok());
  parked_then_gone.close();

  // The good client, connected all along, and a newcomer both still work,
  // including setting the key the vanished client was parked on.
  Bytes value;
  ASSERT_TRUE(good->set("later", bytes_of("2")).ok());
  auto newcomer = connect();
  ASSERT_TRUE(newcomer);
  Status status = newcomer->get("before", patient(), &value);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(value, bytes_of("1"));
  ASSERT_TRUE(newcomer->get("later", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("2"));
  ASSERT_TRUE(newcomer->set("after", bytes_of("3")).ok());
  ASSERT_TRUE(good->get("after", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("3"));
  // Neither half message was taken as a SET.
  status = good->get("half", soon(milliseconds(100)), &value);
  EXPECT_EQ(status.code(), Code::kTimeout);
}

TEST_F(TcpStoreTest, PipelinedRequestsAreAnsweredInOrder) {
  Socket raw = raw_connect();
  Bytes batch = well_formed(tcp_store::Opcode::kSet, "p", bytes_of("xyz"));
  Bytes get = well_formed(tcp_store::Opcode::kGet, "p");
  Bytes add(8);
  put_i64(add.data(), 5);
  Bytes add_frame = well_formed(tcp_store::Opcode::kAdd, "n", add);
  batch.insert(batch.end(), get.begin(), get.end());
  batch.insert(batch.end(), add_frame.begin(), add_frame.end());
  ASSERT_TRUE(send_all(raw, batch.data(), batch.size(), patient()).ok());

  // SET: empty ok reply; GET: ok + "xyz"; ADD: ok + i64 5.
  const std::vector<Bytes> expected_payloads = {{}, bytes_of("xyz"), add};
  for (const Bytes& expected : expected_payloads) {
    uint8_t header[5];
    ASSERT_TRUE(recv_all(raw, header, sizeof(header), patient()).ok());
    EXPECT_EQ(get_u32(header), 1 + expected.size());
    EXPECT_EQ(header[4], static_cast<uint8_t>(tcp_store::ReplyStatus::kOk));
    Bytes payload(expected.size());
    if (!payload.empty()) {
      ASSERT_TRUE(recv_all(raw, payload.data(), payload.size(), patient()).ok());
    }
    EXPECT_EQ(payload, expected);
  }
}

// Replies must come in request order even when the first request is a GET
// that has to wait: the server holds back the client's later requests.
TEST_F(TcpStoreTest, ParkedGetHoldsBackLaterRequestsOfTheSameClient) {
  Socket raw = raw_connect();
  Bytes batch = well_formed(tcp_store::Opcode::kGet, "w");
  Bytes set = well_formed(tcp_store::Opcode::kSet, "other", bytes_of("o"));
  batch.insert(batch.end(), set.begin(), set.end());
  ASSERT_TRUE(send_all(raw, batch.data(), batch.size(), patient()).ok());
  std::this_thread::sleep_for(milliseconds(100));  // let both reach the server

  auto writer = connect();
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->set("w", bytes_of("wv")).ok());

  const std::vector<Bytes> expected_payloads = {bytes_of("wv"), {}};  // GET's, then SET's
  for (const Bytes& expected : expected_payloads) {
    uint8_t header[5];
    ASSERT_TRUE(recv_all(raw, header, sizeof(header), patient()).ok());
    ASSERT_EQ(get_u32(header), 1 + expected.size());
    EXPECT_EQ(header[4], static_cast<uint8_t>(tcp_store::ReplyStatus::kOk));
    Bytes payload(expected.size());
    if (!payload.empty()) {
      ASSERT_TRUE(recv_all(raw, payload.data(), payload.size(), patient()).ok());
    }
    EXPECT_EQ(payload, expected);
  }
}

TEST_F(TcpStoreTest, TimedOutGetLeavesTheConnectionMarkedUnusable) {
  auto store = connect();
  ASSERT_TRUE(store);
  store->set_timeout(kPatience);
  Bytes value;
  Status status = store->get("never", soon(milliseconds(100)), &value);
  ASSERT_EQ(status.code(), Code::kTimeout) << status.message();
  EXPECT_TRUE(contains(status.message(), "never")) << status.message();
  EXPECT_TRUE(store->broken());

  status = store->set("x", bytes_of("y"));
  EXPECT_EQ(status.code(), Code::kRemoteError) << status.message();
  EXPECT_TRUE(contains(status.message(), "unusable")) << status.message();

  // The server forgot the abandoned GET; setting its key harms no one.
  auto other = connect();
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->set("never", bytes_of("now")).ok());
  ASSERT_TRUE(other->get("never", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("now"));
}

TEST_F(TcpStoreTest, ValueAboveTheMessageLimitIsRejectedBeforeSending) {
  auto store = connect();
  ASSERT_TRUE(store);
  Status status = store->set("huge", Bytes(tcp_store::kMaxMessageBytes));
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
  EXPECT_FALSE(store->broken());
  ASSERT_TRUE(store->set("small", bytes_of("ok")).ok());
}

TEST_F(TcpStoreTest, ConnectToPortNobodyListensOnTimesOutNamingHostAndPort) {
  // Hold a bound but not listening socket: connects to its port are refused,
  // and nobody else can start listening there during the test.
  UniqueFd holder(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(holder.valid());
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(holder.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  const uint16_t port = ntohs(address.sin_port);

  const auto start = Clock::now();
  const auto deadline = start + milliseconds(400);
  std::unique_ptr<TcpStore> store;
  Status status = TcpStore::Connect(kLoopback, port, kSecret, deadline, &store);
  const auto end = Clock::now();
  EXPECT_EQ(status.code(), Code::kTimeout) << status.message();
  EXPECT_TRUE(contains(status.message(), "127.0.0.1:" + std::to_string(port))) << status.message();
  EXPECT_TRUE(contains(status.message(), "refused")) << status.message();
  EXPECT_FALSE(store);
  EXPECT_GE(end, deadline);               // it kept retrying until the deadline...
  EXPECT_LT(end - deadline, seconds(10));  // ...and not for long after it
}

TEST_F(TcpStoreTest, ConnectRetriesUntilTheServerStarts) {
  // Learn a free port, then leave it free for a late server.
  Socket probe;
  uint16_t port = 0;
  ASSERT_TRUE(listen_tcp(kLoopback, 0, &probe, &port).ok());
  probe.close();

  std::unique_ptr<TcpStore> store;
  Status connect_status;
  std::thread client([&] {
    connect_status = TcpStore::Connect(kLoopback, port, kSecret, patient(), &store);
  });
  std::this_thread::sleep_for(milliseconds(300));
  std::unique_ptr<TcpStoreServer> late_server;
  Status status = TcpStoreServer::Start(kLoopback, port, kSecret.bytes, &late_server);
  client.join();
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(connect_status.ok()) << connect_status.message();
  ASSERT_TRUE(store->set("k", bytes_of("v")).ok());
  Bytes value;
  ASSERT_TRUE(store->get("k", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("v"));
}

TEST_F(TcpStoreTest, ServerDestructorReturnsPromptlyWithClientsConnectedAndWaiting) {
  std::vector<std::unique_ptr<TcpStore>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(connect());
    ASSERT_TRUE(idle.back());
  }
  Socket half = raw_connect();
  const uint8_t partial[3] = {1, 2, 3};
  ASSERT_TRUE(send_all(half, partial, sizeof(partial), patient()).ok());

  auto waiter = connect();
  ASSERT_TRUE(waiter);
  Status wait_status;
  std::atomic<bool> waiter_done{false};
  std::thread waiting([&] {
    Bytes value;
    wait_status = waiter->get("never-set", Clock::now() + seconds(120), &value);
    waiter_done = true;
  });
  // Give the GET time to reach the server and be parked.
  std::this_thread::sleep_for(milliseconds(200));

  const auto start = Clock::now();
  server_.reset();
  const auto destroyed = Clock::now();
  waiting.join();
  const auto waiter_returned = Clock::now();

  EXPECT_LT(destroyed - start, seconds(10));
  // The waiter learned the server was gone instead of waiting out its 120 s.
  EXPECT_TRUE(waiter_done.load());
  EXPECT_LT(waiter_returned - start, seconds(30));
  EXPECT_EQ(wait_status.code(), Code::kRemoteError) << wait_status.message();
  EXPECT_TRUE(server_hung_up(half));
  // Idle clients find the connection gone on their next call.
  Status status = idle[0]->set("k", bytes_of("v"));
  EXPECT_FALSE(status.ok());
}

// ---------------------------------------------------------------------------
// Membership: the HELLO, and strangers who never send a good one

TEST_F(TcpStoreTest, WrongSecretIsRejectedAtOnceNamingItWhileMembersCarryOn) {
  auto member = connect();
  ASSERT_TRUE(member);
  ASSERT_TRUE(member->set("x", bytes_of("1")).ok());

  const std::string where = "127.0.0.1:" + std::to_string(server_->port());
  const Bytes prefix(kSecret.bytes.begin(), kSecret.bytes.end() - 1);
  const Bytes longer = bytes_of(std::string(kSecret.bytes.begin(), kSecret.bytes.end()) + "!");
  const std::vector<StoreSecret> wrong = {
      {bytes_of("a guess"), "RR_AUTH_TOKEN"},
      {{}, "RR_AUTH_TOKEN (unset on this rank)"},
      {prefix, "RR_AUTH_TOKEN"},
      {longer, "RR_AUTH_TOKEN"},
  };
  for (const StoreSecret& secret : wrong) {
    SCOPED_TRACE(std::string(secret.bytes.begin(), secret.bytes.end()));
    std::unique_ptr<TcpStore> intruder;
    // A patient deadline: a reject is an answer, not a timeout.
    Status status = TcpStore::Connect(kLoopback, server_->port(), secret, patient(), &intruder);
    EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
    EXPECT_TRUE(contains(status.message(), "rendezvous at " + where + " rejected this rank's " + secret.name))
        << status.message();
    EXPECT_FALSE(intruder);
  }

  Bytes value;
  ASSERT_TRUE(member->get("x", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("1"));
  auto newcomer = connect();
  ASSERT_TRUE(newcomer);
  ASSERT_TRUE(newcomer->get("x", patient(), &value).ok());
}

TEST_F(TcpStoreTest, RequestBeforeHelloIsDroppedUnanswered) {
  Socket stranger = raw_stranger();
  const Bytes set = well_formed(tcp_store::Opcode::kSet, "first", bytes_of("v"));
  ASSERT_TRUE(send_all(stranger, set.data(), set.size(), patient()).ok());
  EXPECT_TRUE(server_hung_up(stranger));  // EOF, not a reply

  auto member = connect();
  ASSERT_TRUE(member);
  Bytes value;
  EXPECT_EQ(member->get("first", soon(milliseconds(100)), &value).code(), Code::kTimeout);
}

TEST_F(TcpStoreTest, StrangerAnnouncingMoreThanAHelloIsDroppedOnTheLengthAlone) {
  Socket stranger = raw_stranger();
  uint8_t length[4];
  put_u32(length, tcp_store::kMaxHelloBytes + 1);
  ASSERT_TRUE(send_all(stranger, length, sizeof(length), patient()).ok());
  EXPECT_TRUE(server_hung_up(stranger));
}

// Idle strangers beyond the cap, half a HELLO, junk, a request before HELLO
// and a HELLO sent a byte a second: members still rendezvous, and every
// stranger is closed, shed or out of time.
TEST_F(TcpStoreTest, JunkHalfOpenSlowAndIdleStrangersDoNotStopMembers) {
  std::vector<Socket> strangers;
  for (size_t i = 0; i < tcp_store::kMaxUnauthenticated + 44; ++i) strangers.push_back(raw_stranger());
  const Bytes hello = hello_frame(kSecret.bytes);
  const std::vector<Bytes> openings = {
      Bytes(hello.begin(), hello.begin() + static_cast<ptrdiff_t>(hello.size() / 2)),
      Bytes(hello.begin(), hello.begin() + 3),
      bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
      frame(100000, 4, 0, ""),
      well_formed(tcp_store::Opcode::kSet, "k", bytes_of("v")),
      Bytes(tcp_store::kMaxHelloBytes + 64, 0xff),
  };
  for (const Bytes& opening : openings) {
    strangers.push_back(raw_stranger());
    ASSERT_TRUE(send_all(strangers.back(), opening.data(), opening.size(), patient()).ok());
  }
  Socket slow = raw_stranger();
  std::atomic<bool> stop{false};
  std::thread dribbler([&] {
    for (size_t i = 0; i < hello.size() && !stop.load(); ++i) {
      if (!send_all(slow, &hello[i], 1, patient()).ok()) return;  // closed by the server
      for (int tick = 0; tick < 10 && !stop.load(); ++tick) std::this_thread::sleep_for(milliseconds(100));
    }
  });

  constexpr int kMembers = 8;
  std::vector<std::thread> members;
  std::atomic<int> failures{0};
  for (int rank = 0; rank < kMembers; ++rank) {
    members.emplace_back([&, rank] {
      std::unique_ptr<TcpStore> store;
      Status status = TcpStore::Connect(kLoopback, server_->port(), kSecret, patient(), &store);
      if (!status.ok()) {
        ADD_FAILURE() << "rank " << rank << ": " << status.message();
        ++failures;
        return;
      }
      if (!store->set("addr/" + std::to_string(rank), bytes_of(std::to_string(rank))).ok()) ++failures;
      for (int peer = 0; peer < kMembers; ++peer) {
        Bytes value;
        if (!store->get("addr/" + std::to_string(peer), patient(), &value).ok()) ++failures;
      }
    });
  }
  for (auto& member : members) member.join();
  EXPECT_EQ(failures.load(), 0);

  for (size_t i = 0; i < strangers.size(); ++i) EXPECT_TRUE(server_hung_up(strangers[i])) << "stranger " << i;
  EXPECT_TRUE(server_hung_up(slow));
  stop = true;
  dribbler.join();

  auto check = connect();
  ASSERT_TRUE(check);
  Bytes value;
  EXPECT_EQ(check->get("k", soon(milliseconds(100)), &value).code(), Code::kTimeout);  // no stranger wrote
}

// ---------------------------------------------------------------------------
// The request parser (also fuzzed: tests/fuzz/store_request_fuzz.cpp)

TEST(StoreWire, ParsesEveryOpcodeAndSaysHowManyBytesItTook) {
  const Bytes delta = {5, 0, 0, 0, 0, 0, 0, 0};
  const struct {
    tcp_store::Opcode opcode;
    std::string key;
    Bytes value;
  } cases[] = {
      {tcp_store::Opcode::kHello, "", bytes_of("secret")},
      {tcp_store::Opcode::kHello, "", {}},
      {tcp_store::Opcode::kSet, "key", bytes_of("value")},
      {tcp_store::Opcode::kSet, std::string("k\0y", 3), {}},
      {tcp_store::Opcode::kGet, "key", {}},
      {tcp_store::Opcode::kAdd, "n", delta},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.opcode));
    Bytes stream = tcp_store::encode_request(c.opcode, c.key, c.value.data(), c.value.size());
    const size_t frame_bytes = stream.size();
    stream.push_back(0x7f);  // the start of whatever comes next
    tcp_store::Request request;
    std::string error;
    ASSERT_EQ(tcp_store::parse_request(stream.data(), stream.size(), tcp_store::kMaxMessageBytes, &request, &error),
              tcp_store::ParseResult::kComplete)
        << error;
    EXPECT_EQ(request.opcode, c.opcode);
    EXPECT_EQ(std::string(request.key), c.key);
    EXPECT_EQ(Bytes(request.value, request.value + request.value_size), c.value);
    EXPECT_EQ(request.frame_bytes, frame_bytes);
  }
}

TEST(StoreWire, EveryProperPrefixOfAValidRequestIsIncomplete) {
  const Bytes stream = tcp_store::encode_request(tcp_store::Opcode::kSet, "key", bytes_of("value").data(), 5);
  for (size_t size = 0; size < stream.size(); ++size) {
    tcp_store::Request request;
    std::string error;
    EXPECT_EQ(tcp_store::parse_request(stream.data(), size, tcp_store::kMaxMessageBytes, &request, &error),
              tcp_store::ParseResult::kIncomplete)
        << size << " bytes: " << error;
  }
}

TEST(StoreWire, MalformedRequestsAreRefusedAsSoonAsTheirBytesShowIt) {
  const auto first = [](const Bytes& bytes, size_t n) { return Bytes(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n)); };
  const auto length_only = [](uint32_t length) {
    Bytes bytes(4);
    put_u32(bytes.data(), length);
    return bytes;
  };
  const uint32_t kAny = tcp_store::kMaxMessageBytes;
  const uint32_t kStranger = tcp_store::kMaxHelloBytes;
  const struct {
    std::string what;
    Bytes bytes;  // only as many as it takes to see the fault
    uint32_t limit;
    std::string says;
  } cases[] = {
      {"shorter than its header", length_only(2), kAny, "shorter than the 5-byte request header"},
      {"more than a stranger may send", length_only(kStranger + 1), kStranger,
       "above the limit of " + std::to_string(kStranger) + " bytes"},
      {"more than anyone may send", length_only(0xffffffffu), kAny, "above the limit"},
      {"unknown opcode", first(frame(9, 0x7f, 4, "oops"), 5), kAny, "unknown opcode 127"},
      {"key past the end", first(frame(9, 1, 1000, "abcd"), 9), kAny,
       "key of 1000 bytes runs past the end of a 9-byte request"},
      {"GET with a value", first(well_formed(tcp_store::Opcode::kGet, "k", bytes_of("v")), 9), kAny,
       "GET carries a value of 1 bytes"},
      {"ADD without a delta", first(well_formed(tcp_store::Opcode::kAdd, "k", bytes_of("1")), 9), kAny,
       "ADD carries 1 bytes instead of an 8-byte delta"},
      {"HELLO with a key", first(well_formed(tcp_store::Opcode::kHello, "k"), 9), kAny, "HELLO carries a key"},
      {"HELLO with a secret above the limit",
       first(hello_frame(Bytes(tcp_store::kMaxSecretBytes + 1, 's')), 9), kAny,
       "HELLO carries a secret of " + std::to_string(tcp_store::kMaxSecretBytes + 1) + " bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    tcp_store::Request request;
    std::string error;
    EXPECT_EQ(tcp_store::parse_request(c.bytes.data(), c.bytes.size(), c.limit, &request, &error),
              tcp_store::ParseResult::kMalformed);
    EXPECT_TRUE(contains(error, c.says)) << error;
  }
}

TEST(StoreWire, SecretsCompareByContentAndLength) {
  const Bytes a = bytes_of("secret");
  const Bytes b = bytes_of("secreT");
  const Bytes prefix = bytes_of("secre");
  EXPECT_TRUE(tcp_store::secrets_equal(a.data(), a.size(), a.data(), a.size()));
  EXPECT_FALSE(tcp_store::secrets_equal(a.data(), a.size(), b.data(), b.size()));
  EXPECT_FALSE(tcp_store::secrets_equal(a.data(), a.size(), prefix.data(), prefix.size()));
  EXPECT_FALSE(tcp_store::secrets_equal(prefix.data(), prefix.size(), a.data(), a.size()));
  EXPECT_FALSE(tcp_store::secrets_equal(a.data(), a.size(), nullptr, 0));
  EXPECT_TRUE(tcp_store::secrets_equal(nullptr, 0, nullptr, 0));
}

TEST(Socket, ConnectToUnresolvableHostFailsNamingTheHost) {
  Socket socket;
  Status status = connect_tcp("no-such-host.invalid", 1, soon(milliseconds(200)), &socket);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(contains(status.message(), "no-such-host.invalid")) << status.message();
}

// ---------------------------------------------------------------------------
// FileStore

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed";
    path_ = dir_.path() + "/store";
  }

  std::unique_ptr<FileStore> open_store() {
    std::unique_ptr<FileStore> store;
    Status status = FileStore::Open(path_, &store);
    EXPECT_TRUE(status.ok()) << status.message();
    return store;
  }

  // Appends raw bytes to the store file, bypassing the store.
  void append_raw(const Bytes& bytes) {
    UniqueFd fd(open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(write(fd.get(), bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  static Bytes record_header(uint32_t magic, uint32_t key_length, uint32_t value_length) {
    Bytes out;
    append_u32(&out, magic);
    append_u32(&out, key_length);
    append_u32(&out, value_length);
    return out;
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(FileStoreTest, OpenCreatesTheFileReadableOnlyByItsOwner) {
  auto store = open_store();
  ASSERT_TRUE(store);
  struct stat info {};
  ASSERT_EQ(stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(store->path(), path_);
}

TEST_F(FileStoreTest, OpenInMissingDirectoryFailsNamingThePath) {
  std::unique_ptr<FileStore> store;
  const std::string path = dir_.path() + "/no/such/dir/store";
  Status status = FileStore::Open(path, &store);
  EXPECT_EQ(status.code(), Code::kSystemError);
  EXPECT_TRUE(contains(status.message(), path)) << status.message();
  EXPECT_FALSE(store);
}

TEST_F(FileStoreTest, StoreReopenedLaterSeesEarlierRecords) {
  {
    auto writer = open_store();
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->set("k", bytes_of("v1")).ok());
    ASSERT_TRUE(writer->set("k", bytes_of("v2")).ok());
  }
  auto reader = open_store();
  ASSERT_TRUE(reader);
  Bytes value;
  ASSERT_TRUE(reader->get("k", patient(), &value).ok());
  EXPECT_EQ(value, bytes_of("v2"));  // latest record wins
}

// fcntl locks are what keep separate processes apart: fork real ones, and
// hold them at a pipe until all exist so that their adds overlap.
TEST_F(FileStoreTest, AddFromFourProcessesCountsExactly) {
  constexpr int kProcesses = 4;
  constexpr int kIncrements = 250;
  int start_pipe[2];
  ASSERT_EQ(pipe2(start_pipe, O_CLOEXEC), 0);
  UniqueFd start_read(start_pipe[0]);
  UniqueFd start_write(start_pipe[1]);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: no gtest here; the exit code is the verdict. Open first, then
      // wait for the parent to close the pipe (read returns 0).
      start_write.reset();
      std::unique_ptr<FileStore> store;
      if (!FileStore::Open(path_, &store).ok()) _exit(2);
      char byte;
      while (read(start_read.get(), &byte, 1) < 0 && errno == EINTR) {
      }
      for (int i = 0; i < kIncrements; ++i) {
        int64_t result = 0;
        if (!store->add("procs", 1, patient(), &result).ok()) _exit(3);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  start_write.reset();  // go
  for (pid_t pid : children) {
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "child status " << wstatus;
  }
  auto store = open_store();
  ASSERT_TRUE(store);
  int64_t total = -1;
  ASSERT_TRUE(store->add("procs", 0, patient(), &total).ok());
  EXPECT_EQ(total, kProcesses * kIncrements);
}

TEST_F(FileStoreTest, GarbageAfterAValidRecordIsReportedWithFileAndOffset) {
  auto store = open_store();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->set("a", bytes_of("1")).ok());  // 12 + 1 + 1 = 14 bytes
  ASSERT_NO_FATAL_FAILURE(append_raw(bytes_of("this is not a record at all")));

  auto reader = open_store();
  ASSERT_TRUE(reader);
  Bytes value;
  Status status = reader->get("a", patient(), &value);
  EXPECT_EQ(status.code(), Code::kRemoteError) << status.message();
  EXPECT_TRUE(contains(status.message(), path_)) << status.message();
  EXPECT_TRUE(contains(status.message(), "offset 14")) << status.message();
  EXPECT_TRUE(contains(status.message(), "magic")) << status.message();
  // Writers refuse to append after a corrupt record too.
  EXPECT_FALSE(reader->set("b", bytes_of("2")).ok());
}

TEST_F(FileStoreTest, TruncatedRecordIsReportedWithFileAndOffset) {
  auto store = open_store();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->set("a", bytes_of("1")).ok());
  Bytes cut = record_header(file_store::kRecordMagic, 1, 100);
  cut.push_back('k');
  cut.resize(cut.size() + 10, 'v');  // 90 bytes of the value missing
  ASSERT_NO_FATAL_FAILURE(append_raw(cut));

  Bytes value;
  Status status = store->get("k", patient(), &value);
  EXPECT_EQ(status.code(), Code::kRemoteError) << status.message();
  EXPECT_TRUE(contains(status.message(), path_)) << status.message();
  EXPECT_TRUE(contains(status.message(), "offset 14")) << status.message();
  EXPECT_TRUE(contains(status.message(), "truncated")) << status.message();
}

TEST_F(FileStoreTest, ImpossibleLengthIsCorruptionNotAnAllocation) {
  ASSERT_NO_FATAL_FAILURE(append_raw(record_header(file_store::kRecordMagic, 1, 0xffffffffu)));
  auto store = open_store();
  ASSERT_TRUE(store);
  Bytes value;
  Status status = store->get("k", patient(), &value);
  EXPECT_EQ(status.code(), Code::kRemoteError) << status.message();
  EXPECT_TRUE(contains(status.message(), "offset 0")) << status.message();
  EXPECT_TRUE(contains(status.message(), "value length")) << status.message();
}

TEST_F(FileStoreTest, OversizedKeyIsRejectedBeforeWriting) {
  auto store = open_store();
  ASSERT_TRUE(store);
  Status status = store->set(std::string(file_store::kMaxKeyBytes + 1, 'k'), bytes_of("v"));
  EXPECT_EQ(status.code(), Code::kInvalidArgument) << status.message();
  struct stat info {};
  ASSERT_EQ(stat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_size, 0);
}

}  // namespace
}  // namespace rr::bootstrap
