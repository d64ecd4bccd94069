// rrAllToAllv and rrAllToAllvAsync (MPI_Alltoallv): random uneven counts,
// zeros included, blocks at shuffled displacements with gaps between them,
// checked element by element (and the gaps untouched); a count that
// disagrees with the peer's, with and without RR_CHECK_ARGUMENTS; and the
// arguments refused. Part of collectives_test (collectives_env.hpp).

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collectives_env.hpp"

namespace {

using namespace collectives_env;

constexpr uint8_t kUntouched = 0xEE;

// Every rank's view of one call: counts[s][r] elements go from rank s to
// rank r. Every rank draws the same matrix from the seed, and its own
// layout (shuffled block order, gaps) from the seed and its rank.
struct Plan {
  std::vector<std::vector<size_t>> counts;  // [from][to]
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
  size_t send_elems = 0, recv_elems = 0;
};

// Blocks of `counts` (indexed by peer) laid out in a random order with
// random gaps of 0..2 elements before each; returns the buffer's length.
size_t lay_out(const std::vector<size_t>& counts, std::mt19937_64& rng, std::vector<size_t>* displs) {
  std::vector<size_t> order(counts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  displs->assign(counts.size(), 0);
  size_t end = 0;
  for (size_t p : order) {
    end += rng() % 3;
    (*displs)[p] = end;
    end += counts[p];
  }
  return end + rng() % 3;
}

// Counts up to `largest`, a quarter of them 0.
Plan make_plan(uint64_t seed, size_t largest) {
  Plan plan;
  const size_t n = static_cast<size_t>(g_size);
  std::mt19937_64 shared(seed);
  plan.counts.assign(n, std::vector<size_t>(n));
  for (auto& row : plan.counts) {
    for (size_t& c : row) c = shared() % 4 == 0 ? 0 : shared() % (largest + 1);
  }
  const size_t me = static_cast<size_t>(g_rank);
  for (size_t p = 0; p < n; ++p) {
    plan.sendcounts.push_back(plan.counts[me][p]);
    plan.recvcounts.push_back(plan.counts[p][me]);
  }
  std::mt19937_64 mine(seed * 31 + me);
  plan.send_elems = lay_out(plan.sendcounts, mine, &plan.sdispls);
  plan.recv_elems = lay_out(plan.recvcounts, mine, &plan.rdispls);
  return plan;
}

// Element k of the block rank `from` sends rank `to`, as 8 bytes of which a
// type keeps the first `elem`.
uint64_t value(uint64_t seed, size_t from, size_t to, size_t k) {
  uint64_t x = seed ^ (from << 56) ^ (to << 44) ^ (k * 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

std::vector<uint8_t> send_buffer(const Plan& plan, uint64_t seed, size_t elem) {
  std::vector<uint8_t> send(plan.send_elems * elem + 1, kUntouched);
  for (size_t to = 0; to < plan.sendcounts.size(); ++to) {
    for (size_t k = 0; k < plan.sendcounts[to]; ++k) {
      const uint64_t v = value(seed, static_cast<size_t>(g_rank), to, k);
      std::memcpy(&send[(plan.sdispls[to] + k) * elem], &v, elem);
    }
  }
  return send;
}

// Every received block exactly, and every byte outside the blocks as it was.
void check_received(const Plan& plan, uint64_t seed, size_t elem, const std::vector<uint8_t>& recv) {
  std::vector<bool> in_block(recv.size(), false);
  size_t wrong = 0;
  for (size_t from = 0; from < plan.recvcounts.size(); ++from) {
    for (size_t k = 0; k < plan.recvcounts[from]; ++k) {
      const uint64_t v = value(seed, from, static_cast<size_t>(g_rank), k);
      const size_t at = (plan.rdispls[from] + k) * elem;
      if (std::memcmp(&recv[at], &v, elem) != 0 && wrong++ < 5) {
        ADD_FAILURE() << "element " << k << " of the block from rank " << from << " is wrong";
      }
      for (size_t b = 0; b < elem; ++b) in_block[at + b] = true;
    }
  }
  EXPECT_EQ(wrong, 0u);
  for (size_t i = 0; i < recv.size(); ++i) {
    if (!in_block[i]) {
      ASSERT_EQ(recv[i], kUntouched) << "byte " << i << " outside every block was written";
    }
  }
}

void run_plan(rrComm_t comm, rrDataType_t dtype, size_t elem, size_t largest, uint64_t seed, bool async) {
  SCOPED_TRACE("all-to-all-v of blocks up to " + std::to_string(largest) + " elements of " + std::to_string(elem) +
               " bytes, seed " + std::to_string(seed) + (async ? ", async" : ""));
  Plan plan = make_plan(seed, largest);
  const std::vector<uint8_t> send = send_buffer(plan, seed, elem);
  std::vector<uint8_t> recv(plan.recv_elems * elem + 1, kUntouched);
  if (!async) {
    ASSERT_EQ(rrAllToAllv(send.data(), plan.sendcounts.data(), plan.sdispls.data(), recv.data(),
                          plan.recvcounts.data(), plan.rdispls.data(), dtype, comm, nullptr),
              rrSuccess)
        << rrGetLastError(comm);
  } else {
    rrRequest_t request = nullptr;
    ASSERT_EQ(rrAllToAllvAsync(send.data(), plan.sendcounts.data(), plan.sdispls.data(), recv.data(),
                               plan.recvcounts.data(), plan.rdispls.data(), dtype, comm, &request),
              rrSuccess)
        << rrGetLastError(comm);
    // The call copied the arrays: scribbling on them (and freeing them)
    // must not change what it does.
    const Plan kept = plan;
    for (auto* v : {&plan.sendcounts, &plan.sdispls, &plan.recvcounts, &plan.rdispls}) {
      std::fill(v->begin(), v->end(), ~size_t{0});
      std::vector<size_t>().swap(*v);
    }
    ASSERT_EQ(rrWait(request), rrSuccess) << rrGetLastError(comm);
    plan = kept;
  }
  check_received(plan, seed, elem, recv);
}

TEST(AllToAllv, RandomUnevenCountsArriveExactly) {
  uint64_t seed = 9000;
  const struct {
    rrDataType_t dtype;
    size_t elem;
  } types[] = {{rrUint8, 1}, {rrFloat16, 2}, {rrInt32, 4}, {rrFloat64, 8}};
  for (const auto& t : types) {
    for (size_t largest : {size_t{1}, size_t{5}, size_t{97}}) {
      for (int round = 0; round < 3; ++round) run_plan(g_small_comm, t.dtype, t.elem, largest, ++seed, false);
    }
    // Blocks of up to ~1 MiB: UCX's rendezvous protocol, several at once.
    run_plan(g_comm, t.dtype, t.elem, (size_t{1} << 20) / t.elem, ++seed, false);
  }
}

TEST(AllToAllv, AsyncCopiesTheArraysAtTheCall) {
  uint64_t seed = 9500;
  for (size_t largest : {size_t{0}, size_t{3}, size_t{1000}, size_t{200000}}) {
    run_plan(g_comm, rrInt64, 8, largest, ++seed, true);
  }
}

TEST(AllToAllv, SeveralAsyncInFlightWaitedInReverse) {
  const int kCalls = 4;
  std::vector<Plan> plans;
  std::vector<std::vector<uint8_t>> sends, recvs;
  std::vector<rrRequest_t> requests(kCalls);
  for (int c = 0; c < kCalls; ++c) {
    plans.push_back(make_plan(9700 + static_cast<uint64_t>(c), 300));
    sends.push_back(send_buffer(plans.back(), 9700 + static_cast<uint64_t>(c), 4));
    recvs.emplace_back(plans.back().recv_elems * 4 + 1, kUntouched);
  }
  for (int c = 0; c < kCalls; ++c) {
    const Plan& p = plans[static_cast<size_t>(c)];
    ASSERT_EQ(rrAllToAllvAsync(sends[static_cast<size_t>(c)].data(), p.sendcounts.data(), p.sdispls.data(),
                               recvs[static_cast<size_t>(c)].data(), p.recvcounts.data(), p.rdispls.data(), rrUint32,
                               g_comm, &requests[static_cast<size_t>(c)]),
              rrSuccess)
        << rrGetLastError(g_comm);
  }
  for (int c = kCalls - 1; c >= 0; --c) ASSERT_EQ(rrWait(requests[static_cast<size_t>(c)]), rrSuccess);
  for (int c = 0; c < kCalls; ++c) {
    check_received(plans[static_cast<size_t>(c)], 9700 + static_cast<uint64_t>(c), 4, recvs[static_cast<size_t>(c)]);
  }
}

TEST(AllToAllv, NothingToSendAnywhereTakesNullBuffers) {
  const std::vector<size_t> zeros(static_cast<size_t>(g_size), 0), displs(static_cast<size_t>(g_size), 12345);
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(rrAllToAllv(nullptr, zeros.data(), displs.data(), nullptr, zeros.data(), displs.data(), rrFloat32,
                          g_comm, nullptr),
              rrSuccess)
        << rrGetLastError(g_comm);
  }
  // And the communicator is still in step.
  run_plan(g_comm, rrInt8, 1, 9, 9900, false);
}

// Refused on every rank alike, before anything is sent.
TEST(AllToAllv, BadArgumentsNameTheArgument) {
  const size_t n = static_cast<size_t>(g_size);
  std::vector<size_t> ones(n, 1), displs(n);
  std::iota(displs.begin(), displs.end(), size_t{0});
  std::vector<int32_t> send(n), recv(n);
  auto expect = [&](rrResult_t result, const std::string& text) {
    EXPECT_EQ(result, rrInvalidArgument) << text;
    const std::string error = rrGetLastError(g_comm);
    EXPECT_NE(error.find("rrAllToAllv: " + text), std::string::npos) << error;
  };
  expect(rrAllToAllv(send.data(), nullptr, displs.data(), recv.data(), ones.data(), displs.data(), rrInt32, g_comm,
                     nullptr),
         "sendcounts is NULL");
  expect(rrAllToAllv(send.data(), ones.data(), nullptr, recv.data(), ones.data(), displs.data(), rrInt32, g_comm,
                     nullptr),
         "sdispls is NULL");
  expect(rrAllToAllv(send.data(), ones.data(), displs.data(), recv.data(), nullptr, displs.data(), rrInt32, g_comm,
                     nullptr),
         "recvcounts is NULL");
  expect(rrAllToAllv(send.data(), ones.data(), displs.data(), recv.data(), ones.data(), nullptr, rrInt32, g_comm,
                     nullptr),
         "rdispls is NULL");
  expect(rrAllToAllv(nullptr, ones.data(), displs.data(), recv.data(), ones.data(), displs.data(), rrInt32, g_comm,
                     nullptr),
         "sendbuff is NULL with sendcounts[0]=1");
  expect(rrAllToAllv(send.data(), ones.data(), displs.data(), nullptr, ones.data(), displs.data(), rrInt32, g_comm,
                     nullptr),
         "recvbuff is NULL with recvcounts[0]=1");
  // The receive blocks run into the send blocks: one buffer for both.
  std::vector<int32_t> both(2 * n);
  expect(rrAllToAllv(both.data(), ones.data(), displs.data(), both.data() + n - 1, ones.data(), displs.data(), rrInt32,
                     g_comm, nullptr),
         "the send blocks");
  // ... but side by side they are fine.
  ASSERT_EQ(rrAllToAllv(both.data(), ones.data(), displs.data(), both.data() + n, ones.data(), displs.data(), rrInt32,
                        g_comm, nullptr),
            rrSuccess)
      << rrGetLastError(g_comm);
  std::vector<size_t> far = displs;
  far[0] = ~size_t{0} - 1;
  expect(rrAllToAllv(send.data(), ones.data(), far.data(), recv.data(), ones.data(), displs.data(), rrInt32, g_comm,
                     nullptr),
         "sdispls[0]=" + std::to_string(far[0]) + " + sendcounts[0]=1 overflows");
  rrRequest_t request = nullptr;
  expect(rrAllToAllvAsync(send.data(), nullptr, displs.data(), recv.data(), ones.data(), displs.data(), rrInt32,
                          g_comm, &request),
         "sendcounts is NULL");
  EXPECT_EQ(request, nullptr);
  EXPECT_EQ(rrAllToAllvAsync(send.data(), ones.data(), displs.data(), recv.data(), ones.data(), displs.data(), rrInt32,
                             g_comm, nullptr),
            rrInvalidArgument);
  EXPECT_EQ(rrAllToAllv(send.data(), ones.data(), displs.data(), recv.data(), ones.data(), displs.data(),
                        static_cast<rrDataType_t>(99), g_comm, nullptr),
            rrInvalidArgument);
}

// A count that disagrees with the peer's breaks the call on every rank (a
// communicator of its own: a mismatch breaks it), naming the two ranks.
// With RR_CHECK_ARGUMENTS the pair finds it before any data moves; without,
// the receiver finds it in the data, and every other rank fails by its next
// call at the latest.
void check_mismatch(bool check_arguments) {
  SCOPED_TRACE(check_arguments ? "RR_CHECK_ARGUMENTS=1" : "RR_CHECK_ARGUMENTS=0");
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.check_arguments = check_arguments ? 1 : 0;
  config.timeout_ms = 60000;
  rrComm_t comm = nullptr;
  ASSERT_EQ(rrCommSplit(g_comm, 0, g_rank, &comm, &config), rrSuccess) << rrGetLastError(g_comm);
  // One good call first: every pair of ranks is connected before the bad
  // one (a connection still being made when a peer gives up is UCX noise).
  run_plan(comm, rrUint8, 1, 4, 9990, false);
  const size_t n = static_cast<size_t>(g_size);
  std::vector<size_t> counts(n, 2), displs(n);
  for (size_t p = 0; p < n; ++p) displs[p] = 3 * p;  // room for one more element in every block
  std::vector<size_t> sendcounts = counts;
  const int from = 0, to = g_size - 1;  // rank `from` sends one element too many to rank `to`
  if (g_rank == from) sendcounts[static_cast<size_t>(to)] = 3;
  std::vector<double> send(3 * n, 1.0), recv(3 * n, 0.0);
  const rrResult_t result = rrAllToAllv(send.data(), sendcounts.data(), displs.data(), recv.data(), counts.data(),
                                        displs.data(), rrFloat64, comm, nullptr);
  const std::string error = result == rrSuccess ? "" : rrGetLastError(comm);
  const std::string f = std::to_string(from), t = std::to_string(to);
  if (check_arguments || g_rank == to) {
    EXPECT_NE(result, rrSuccess);
  }
  if (check_arguments && (g_rank == from || g_rank == to)) {
    EXPECT_EQ(result, rrInvalidUsage) << error;
    EXPECT_NE(error.find("rank " + f + " sends 3 elements to rank " + t + " (its sendcounts[" + t + "]), but rank " +
                         t + " expects 2"),
              std::string::npos)
        << error;
  } else if (g_rank == to) {
    // The receiver sees the longer message (to itself, with one rank: the
    // count check comes first there).
    EXPECT_NE(error.find("rank " + f), std::string::npos) << error;
  } else if (result != rrSuccess) {
    EXPECT_NE(error.find("reported"), std::string::npos) << error;
  }
  // Whatever this rank's call returned, the communicator is no longer usable.
  if (g_size > 1) {
    EXPECT_NE(rrBarrier(comm, nullptr), rrSuccess);
  }
  // Every rank is done with it before any rank takes it down.
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
  EXPECT_EQ(rrCommDestroy(comm), rrSuccess);
}

TEST(AllToAllv, CountThatDisagreesWithThePeersNamesIt) { check_mismatch(true); }

TEST(AllToAllv, CountThatDisagreesIsFoundWithoutTheArgumentCheck) { check_mismatch(false); }

}  // namespace
