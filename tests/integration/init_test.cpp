// Init methods and their failures, with ranks as threads of this process:
// unique id, tcp://, file://, env://, a peer that never arrives, a master
// nobody serves, and arguments that must be refused with a named reason.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <ringreduce/ringreduce.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "free_port.hpp"

namespace {


rrConfig_t config_with_timeout(int ms) {
  rrConfig_t c = RR_CONFIG_INITIALIZER;
  c.timeout_ms = ms;
  return c;
}

// Runs `init(rank, &comm)` on n threads, then an allreduce that proves the
// ranks are connected to each other; returns each rank's init result.
std::vector<rrResult_t> run_ranks(int n, const std::function<rrResult_t(int, rrComm_t*)>& init,
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
    for (rrResult_t r : run_ranks(n, [&](int rank, rrComm_t* c) { return rrCommInitRank(c, n, id, rank); })) {
      EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
    }
  }
}

TEST(Init, TcpUrl) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  for (rrResult_t r : run_ranks(3, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), 3, rank, nullptr); })) {
    EXPECT_EQ(r, rrSuccess) << rrGetLastError(nullptr);
  }
}

TEST(Init, FileUrl) {
  char dir[] = "/tmp/rr-init-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/store";
  const std::string url = "file://" + path;
  for (rrResult_t r : run_ranks(3, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, url.c_str(), 3, rank, nullptr); })) {
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
    for (rrResult_t r : run_ranks(2, [&](int rank, rrComm_t* c) { return rrCommInitUrl(c, "env://", 2, rank, nullptr); })) {
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
  auto results = run_ranks(2, [&](int rank, rrComm_t* c) {
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
  auto results = run_ranks(2, [&](int, rrComm_t* c) { return rrCommInitRankConfig(c, 2, id, 0, &config); }, &errors);
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

TEST(Api, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(rrGetVersion(&v), rrSuccess);
  EXPECT_EQ(v, RR_VERSION_CODE);
  for (int r = 0; r < rrNumResults; ++r) EXPECT_STRNE(rrGetErrorString(static_cast<rrResult_t>(r)), "unknown result code");
}

}  // namespace
