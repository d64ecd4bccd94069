// Init methods and their failures, with ranks as threads of this process:
// unique id, tcp://, file://, env://, a peer that never arrives, a master
// nobody serves, arguments that must be refused with a named reason, and the
// rendezvous's guard: secrets, RR_AUTH_TOKEN off loopback, strangers' junk.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <ringreduce/ringreduce.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/unique_id.hpp"
#include "free_port.hpp"

namespace {

using rr::bootstrap::UniqueIdWire;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

UniqueIdWire wire_of(const rrUniqueId& id) {
  UniqueIdWire wire;
  std::memcpy(&wire, id.internal, sizeof(wire));
  return wire;
}

// The first IPv4 address of an interface that is up and not loopback, or "".
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP) ||
        (a->ifa_flags & IFF_LOOPBACK)) {
      continue;
    }
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

// A plain blocking TCP connection, as a stranger would open one; -1 on failure.
int connect_stranger(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = list; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(list);
  return fd;
}


rrConfig_t config_with_timeout(int ms) {
  rrConfig_t c = RR_CONFIG_INITIALIZER;
  c.timeout_ms = ms;
  return c;
}

// Runs `init(rank, &comm)` on n threads, then an allreduce that proves the
// ranks are connected to each other; returns each rank's init result.
std::vector<rrResult_t> init_on_threads(int n, const std::function<rrResult_t(int, rrComm_t*)>& init,
                                        std::vector<std::string>* errors = nullptr) {
  std::vector<rrResult_t> results(static_cast<size_t>(n));
  std::vector<std::string> messages(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      rrComm_t comm = nullptr;
      results[r] = init(r, &comm);
      if (results[r] != rrSuccess) {
        messages[r] = rrGetLastError(nullptr);
        return;
      }
      int size = 0, rank = -1;
      EXPECT_EQ(rrCommCount(comm, &size), rrSuccess);
      EXPECT_EQ(rrCommUserRank(comm, &rank), rrSuccess);
      EXPECT_EQ(size, n);
      EXPECT_EQ(rank, r);
      std::vector<int64_t> v(37, r + 1);
      EXPECT_EQ(rrAllReduce(v.data(), v.data(), v.size(), rrInt64, rrSum, comm, nullptr), rrSuccess)
          << rrGetLastError(comm);
      for (int64_t x : v) EXPECT_EQ(x, static_cast<int64_t>(n) * (n + 1) / 2);
      EXPECT_EQ(rrCommDestroy(comm), rrSuccess);
    });
  }
  for (auto& t : threads) t.join();
  if (errors) *errors = messages;
  return results;
}

TEST(Init, UniqueIdOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    rrUniqueId id;
    ASSERT_EQ(rrGetUniqueId(&id), rrSuccess) << rrGetLastError(nullptr);
    for (rrResult_t r : init_on_threads(n, [&](int rank, rrComm_t* c) { return rrCommInitRank(c, n, id, rank); })) {
      EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
    }
  }
}

TEST(Init, TcpUrl) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  for (rrResult_t r : init_on_threads(3, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), 3, rank, nullptr); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
}

TEST(Init, FileUrl) {
  char dir[] = "/tmp/rr-init-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/store";
  const std::string url = "file://" + path;
  for (rrResult_t r : init_on_threads(3, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), 3, rank, nullptr); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
  unlink(path.c_str());
  rmdir(dir);
}

TEST(Init, EnvUrlTwiceInOneProcess) {
  // torch.distributed's env:// variables; explicit rank and size because
  // the threads share one environment. Two communicators in a row on the
  // same MASTER_PORT must not see each other's keys.
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  for (int round = 0; round < 2; ++round) {
    for (rrResult_t r : init_on_threads(2, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, "env://", 2, rank, nullptr); })) {
      EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
    }
  }
}

TEST(Init, PeerThatNeverArrivesTimesOutNamingIt) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  rrConfig_t config = config_with_timeout(500);
  rrComm_t comm = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(rrCommInitUrl(&comm, url.c_str(), 2, 0, &config), rrTimeout);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string error = rrGetLastError(nullptr);
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
  EXPECT_EQ(comm, nullptr);
  // Bounded by the timeout, not by the machine's mood: generous slack.
  EXPECT_LT(seconds, 30.0);
}

TEST(Init, UnreachableMasterTimesOutNamingTheAddress) {
  const uint16_t port = free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  rrConfig_t config = config_with_timeout(500);
  rrComm_t comm = nullptr;
  EXPECT_EQ(rrCommInitUrl(&comm, url.c_str(), 2, 1, &config), rrTimeout);
  const std::string error = rrGetLastError(nullptr);
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << error;
}

TEST(Init, MismatchedWorldSizesAreReported) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  rrConfig_t config = config_with_timeout(3000);
  std::vector<std::string> errors;
  auto results = init_on_threads(2, [&](int rank, rrComm_t* c) {
    return rrCommInitUrl(c, url.c_str(), rank == 0 ? 2 : 3, rank, &config);
  }, &errors);
  EXPECT_NE(results[0], rrSuccess);
  EXPECT_NE(results[1], rrSuccess);
  const std::string all = errors[0] + " | " + errors[1];
  EXPECT_NE(all.find("world size"), std::string::npos) << all;
}

TEST(Init, DuplicateRankIsReported) {
  rrUniqueId id;
  ASSERT_EQ(rrGetUniqueId(&id), rrSuccess);
  rrConfig_t config = config_with_timeout(3000);
  std::vector<std::string> errors;
  auto results = init_on_threads(2, [&](int, rrComm_t* c) { return rrCommInitRankConfig(c, 2, id, 0, &config); }, &errors);
  const bool one_refused = (results[0] == rrInvalidArgument) || (results[1] == rrInvalidArgument);
  EXPECT_TRUE(one_refused) << errors[0] << " | " << errors[1];
  EXPECT_NE((errors[0] + errors[1]).find("claimed by more than one"), std::string::npos) << errors[0] << " | " << errors[1];
}

TEST(Init, BadArgumentsNameTheArgument) {
  rrUniqueId id;
  ASSERT_EQ(rrGetUniqueId(&id), rrSuccess);
  rrComm_t comm = nullptr;
  struct Case {
    std::function<rrResult_t()> call;
    rrResult_t expect;
    std::string names;
  } cases[] = {
      {[&] { return rrCommInitRank(&comm, 0, id, 0); }, rrInvalidArgument, "nranks=0"},
      {[&] { return rrCommInitRank(&comm, -3, id, 0); }, rrInvalidArgument, "nranks=-3"},
      {[&] { return rrCommInitRank(&comm, 2, id, 2); }, rrInvalidArgument, "rank=2"},
      {[&] { return rrCommInitRank(&comm, 2, id, -1); }, rrInvalidArgument, "rank=-1"},
      {[&] { return rrCommInitRank(nullptr, 2, id, 0); }, rrInvalidArgument, "comm"},
      {[&] { rrUniqueId junk{}; return rrCommInitRank(&comm, 2, junk, 0); }, rrInvalidArgument, "comm_id"},
      {[&] { return rrCommInitUrl(&comm, "udp://x:1", 2, 0, nullptr); }, rrInvalidArgument, "udp://x:1"},
      {[&] { return rrCommInitUrl(&comm, "tcp://nohostport", 2, 0, nullptr); }, rrInvalidArgument, "host:port"},
      {[&] { return rrCommInitUrl(&comm, "tcp://127.0.0.1:70000", 2, 0, nullptr); }, rrInvalidArgument, "port"},
      {[&] { return rrCommInitUrl(&comm, nullptr, 2, 0, nullptr); }, rrInvalidArgument, "url"},
      {[&] { rrConfig_t c = {}; return rrCommInitUrl(&comm, "tcp://127.0.0.1:1", 2, 0, &c); }, rrInvalidArgument, "RR_CONFIG_INITIALIZER"},
      {[&] { rrConfig_t c = RR_CONFIG_INITIALIZER; c.pipeline_depth = 0; return rrCommInitUrl(&comm, "tcp://127.0.0.1:1", 2, 0, &c); }, rrInvalidArgument, "pipeline_depth"},
      {[&] { rrConfig_t c = RR_CONFIG_INITIALIZER; c.chunk_bytes = 1; return rrCommInitUrl(&comm, "tcp://127.0.0.1:1", 2, 0, &c); }, rrInvalidArgument, "chunk_bytes"},
      {[&] { rrConfig_t c = RR_CONFIG_INITIALIZER; c.gpu_segment_bytes = 1; return rrCommInitUrl(&comm, "tcp://127.0.0.1:1", 2, 0, &c); }, rrInvalidArgument, "gpu_segment_bytes"},
      {[&] { return rrGetUniqueId(nullptr); }, rrInvalidArgument, "unique_id"},
  };
  for (auto& c : cases) {
    comm = nullptr;
    EXPECT_EQ(c.call(), c.expect) << c.names;
    EXPECT_NE(std::string(rrGetLastError(nullptr)).find(c.names), std::string::npos)
        << "expected the error to name '" << c.names << "', got: " << rrGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr) << "out-parameter written on failure";
  }
}

TEST(Init, EnvWithoutMasterAddrSaysSo) {
  unsetenv("MASTER_ADDR");
  rrComm_t comm = nullptr;
  EXPECT_EQ(rrCommInitUrl(&comm, "env://", 1, 0, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("MASTER_ADDR"), std::string::npos) << rrGetLastError(nullptr);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("RR_CHUNK_BYTES", "lots", 1);
  setenv("MASTER_PORT", "29999", 1);
  EXPECT_EQ(rrCommInitUrl(&comm, "env://", 1, 0, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("RR_CHUNK_BYTES"), std::string::npos) << rrGetLastError(nullptr);
  unsetenv("RR_CHUNK_BYTES");
  setenv("RR_GPU_REDUCE", "gpu", 1);
  EXPECT_EQ(rrCommInitUrl(&comm, "env://", 1, 0, nullptr), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("RR_GPU_REDUCE=gpu: expected host or device"), std::string::npos)
      << rrGetLastError(nullptr);
  unsetenv("RR_GPU_REDUCE");
}

TEST(Init, FromEnvUnderOpenMpiVariablesNeedsNoMasterAddress) {
  // What a one-rank mpirun sets: no MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE.
  for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}) unsetenv(v);
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
  setenv("PMIX_NAMESPACE", ("init-test-" + std::to_string(getpid())).c_str(), 1);
  rrComm_t comm = nullptr;
  ASSERT_EQ(rrCommInitFromEnv(&comm), rrSuccess) << rrGetLastError(nullptr);
  int size = 0;
  EXPECT_EQ(rrCommCount(comm, &size), rrSuccess);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(rrCommDestroy(comm), rrSuccess);
  // Across hosts, the missing MASTER_ADDR is named with the launcher.
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(rrCommInitFromEnv(&comm), rrInvalidArgument);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("MASTER_ADDR"), std::string::npos) << rrGetLastError(nullptr);
  EXPECT_NE(std::string(rrGetLastError(nullptr)).find("OpenMPI"), std::string::npos) << rrGetLastError(nullptr);
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_NAMESPACE"}) {
    unsetenv(v);
  }
}

// ---------------------------------------------------------------------------
// The rendezvous admits only the job's members.

TEST(Init, UniqueIdCarriesARandomSecret) {
  rrUniqueId a, b;
  ASSERT_EQ(rrGetUniqueId(&a), rrSuccess) << rrGetLastError(nullptr);
  ASSERT_EQ(rrGetUniqueId(&b), rrSuccess) << rrGetLastError(nullptr);
  const UniqueIdWire wa = wire_of(a);
  const UniqueIdWire wb = wire_of(b);
  static_assert(sizeof(wa.secret) >= 16, "a secret of 16 bytes at least");
  EXPECT_NE(std::memcmp(wa.secret, wb.secret, sizeof(wa.secret)), 0);
  const uint8_t zeros[sizeof(wa.secret)] = {};
  EXPECT_NE(std::memcmp(wa.secret, zeros, sizeof(zeros)), 0);
}

TEST(Init, ForgedUniqueIdIsRejectedNamingTheSecretWhileTheRealRanksComplete) {
  rrUniqueId id;
  ASSERT_EQ(rrGetUniqueId(&id), rrSuccess) << rrGetLastError(nullptr);
  UniqueIdWire wire = wire_of(id);
  wire.secret[0] ^= 1;  // the right host and port, the wrong secret
  rrUniqueId forged = id;
  std::memcpy(forged.internal, &wire, sizeof(wire));

  // A patient timeout: the reject must come as an answer, not as a timeout.
  rrConfig_t config = config_with_timeout(60000);
  rrComm_t comm = nullptr;
  EXPECT_EQ(rrCommInitRankConfig(&comm, 2, forged, 1, &config), rrInvalidArgument);
  const std::string error = rrGetLastError(nullptr);
  const std::string where = std::string(wire.host) + ":" + std::to_string(wire.port);
  EXPECT_TRUE(contains(error, "rendezvous at " + where + " rejected this rank's unique id's secret")) << error;
  EXPECT_EQ(comm, nullptr);

  for (rrResult_t r : init_on_threads(2, [&](int rank, rrComm_t* c) { return rrCommInitRank(c, 2, id, rank); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
}

// The intruder is a forked process, since RR_AUTH_TOKEN is per process; the
// real ranks are threads here.
TEST(Init, WrongTokenIsRejectedNamingItWhileTheRealRanksComplete) {
  const uint16_t port = free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  setenv("RR_AUTH_TOKEN", "this job's token", 1);
  struct Outcome {
    int result = -1;
    char error[1024] = {};
  };
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t intruder_pid = fork();
  ASSERT_GE(intruder_pid, 0);
  if (intruder_pid == 0) {
    close(pipe_fds[0]);
    setenv("RR_AUTH_TOKEN", "another job's token", 1);
    rrConfig_t config = config_with_timeout(60000);
    rrComm_t comm = nullptr;
    Outcome outcome;
    outcome.result = rrCommInitUrl(&comm, url.c_str(), 2, 1, &config);
    std::snprintf(outcome.error, sizeof(outcome.error), "%s", rrGetLastError(nullptr));
    (void)!write(pipe_fds[1], &outcome, sizeof(outcome));
    _exit(0);
  }
  close(pipe_fds[1]);

  Outcome intruder;
  bool heard = false;
  auto results = init_on_threads(2, [&](int rank, rrComm_t* c) {
    const rrResult_t r = rrCommInitUrl(c, url.c_str(), 2, rank, nullptr);
    // Rank 0 keeps the rendezvous up until the intruder has had its answer
    // (or has given up: its own timeout bounds the wait).
    if (rank == 0) heard = read(pipe_fds[0], &intruder, sizeof(intruder)) == sizeof(intruder);
    return r;
  });
  close(pipe_fds[0]);
  int status = 0;
  waitpid(intruder_pid, &status, 0);
  unsetenv("RR_AUTH_TOKEN");

  for (rrResult_t r : results) EXPECT_EQ(r, rrSuccess);
  ASSERT_TRUE(heard) << "the intruder process reported nothing";
  EXPECT_EQ(intruder.result, rrInvalidArgument) << intruder.error;
  EXPECT_TRUE(contains(intruder.error, "rendezvous at 127.0.0.1:" + std::to_string(port) +
                                           " rejected this rank's RR_AUTH_TOKEN"))
      << intruder.error;
}

TEST(Init, ListeningOnEveryInterfaceWithoutTokenIsRefusedNamingRrAuthToken) {
  unsetenv("RR_AUTH_TOKEN");
  setenv("RR_BIND_ADDR", "0.0.0.0", 1);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  rrComm_t comm = nullptr;
  EXPECT_EQ(rrCommInitUrl(&comm, url.c_str(), 2, 0, nullptr), rrInvalidArgument);
  const std::string error = rrGetLastError(nullptr);
  EXPECT_TRUE(contains(error, "RR_AUTH_TOKEN")) << error;
  EXPECT_TRUE(contains(error, "0.0.0.0")) << error;
  EXPECT_EQ(comm, nullptr);
  unsetenv("RR_BIND_ADDR");
}

TEST(Init, NonLoopbackRendezvousNeedsRrAuthToken) {
  const std::string address = non_loopback_ipv4();
  if (address.empty()) GTEST_SKIP() << "this machine has no IPv4 address outside loopback";
  unsetenv("RR_AUTH_TOKEN");
  const std::string url = "tcp://" + address + ":" + std::to_string(free_port());
  // Refused on every rank, the serving one and the others, without waiting.
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    rrComm_t comm = nullptr;
    EXPECT_EQ(rrCommInitUrl(&comm, url.c_str(), 2, rank, nullptr), rrInvalidArgument);
    const std::string error = rrGetLastError(nullptr);
    EXPECT_TRUE(contains(error, "RR_AUTH_TOKEN")) << error;
    EXPECT_TRUE(contains(error, address)) << error;
    EXPECT_EQ(comm, nullptr);
  }
  // With a token the same address works.
  setenv("RR_AUTH_TOKEN", "a shared secret", 1);
  for (rrResult_t r : init_on_threads(2, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), 2, rank, nullptr); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
  unsetenv("RR_AUTH_TOKEN");
}

// Idle connections beyond the stranger cap, half a HELLO, junk and a
// connection that sends a byte a second, all at the rendezvous before the
// ranks arrive: the ranks still set up (well within their timeout).
TEST(Init, StrangersAtTheRendezvousDoNotStopTheRealRanks) {
  rrUniqueId id;
  ASSERT_EQ(rrGetUniqueId(&id), rrSuccess) << rrGetLastError(nullptr);
  const UniqueIdWire wire = wire_of(id);
  const std::string host = wire.host;

  std::vector<int> strangers;
  for (int i = 0; i < 300; ++i) strangers.push_back(connect_stranger(host, wire.port));
  const std::vector<std::string> openings = {
      std::string("\x2a\x00\x00\x00\x04\x00\x00", 7),  // the start of a HELLO
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      std::string(4096, '\xff'),
  };
  for (const std::string& opening : openings) {
    strangers.push_back(connect_stranger(host, wire.port));
    ASSERT_EQ(send(strangers.back(), opening.data(), opening.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(opening.size()));
  }
  for (int fd : strangers) ASSERT_GE(fd, 0) << "cannot connect to " << host << ":" << wire.port;
  const int slow = connect_stranger(host, wire.port);
  ASSERT_GE(slow, 0);
  std::atomic<bool> stop{false};
  std::thread dribbler([&] {
    const char hello_start[] = {0x2a, 0, 0, 0, 4, 0, 0, 0, 0};
    for (char byte : hello_start) {
      if (stop.load() || send(slow, &byte, 1, MSG_NOSIGNAL) != 1) return;  // closed by the server
      for (int tick = 0; tick < 10 && !stop.load(); ++tick) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  rrConfig_t config = config_with_timeout(60000);
  for (rrResult_t r : init_on_threads(3, [&](int rank, rrComm_t* c) { return rrCommInitRankConfig(c, 3, id, rank, &config); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
  stop = true;
  dribbler.join();
  close(slow);
  for (int fd : strangers) close(fd);
}

TEST(Api, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(rrGetVersion(&v), rrSuccess);
  EXPECT_EQ(v, RR_VERSION_CODE);
  for (int r = 0; r < rrNumResults; ++r) EXPECT_STRNE(rrGetErrorString(static_cast<rrResult_t>(r)), "unknown result code");
}

}  // namespace
