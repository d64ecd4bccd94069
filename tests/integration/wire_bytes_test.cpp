// Bytes on the wire: the ring's halves and the whole allreduce send exactly
// their formulas' bytes, to the ring's next rank only (rrCommGetPeerBytes,
// rrCommGetRingOrder), under whatever ring order the ranks' hosts give.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives_env.hpp"

using namespace collectives_env;

namespace {

// Bytes this rank has sent to each peer so far.
std::vector<uint64_t> bytes_sent_per_peer(rrComm_t comm) {
  std::vector<uint64_t> sent(static_cast<size_t>(g_size));
  for (int p = 0; p < g_size; ++p) {
    uint64_t received = 0;
    EXPECT_EQ(rrCommGetPeerBytes(comm, p, &sent[static_cast<size_t>(p)], &received), rrSuccess);
  }
  return sent;
}

// Where this rank sits in the ring (rrCommGetRingOrder): its position and
// the rank after it.
struct RingPlace {
  std::vector<int> order;
  int position = 0;
  int right = 0;
};

RingPlace ring_place(rrComm_t comm) {
  RingPlace place;
  place.order.assign(static_cast<size_t>(g_size), -1);
  EXPECT_EQ(rrCommGetRingOrder(comm, place.order.data()), rrSuccess) << rrGetLastError(comm);
  for (int p = 0; p < g_size; ++p) {
    if (place.order[static_cast<size_t>(p)] == g_rank) place.position = p;
  }
  place.right = place.order[static_cast<size_t>((place.position + 1) % g_size)];
  return place;
}

// Before each collective a rank sends its 32-byte operation header to both
// ring neighbours (one when there are two ranks) to check that all ranks
// called the same thing (README, "Failures"; lib/exec/wire.hpp).
uint64_t header_bytes_per_call() {
  if (g_size == 1) return 0;
  return g_size == 2 ? 32 : 64;  // wire::kOpHeaderBytes each
}

TEST(ReduceScatterAndAllGather, EachSendsNMinusOneOverNOfTheData) {
  // Both halves of the ring: every rank sends (N-1) of its N blocks, once,
  // to its right neighbour, and nothing to anyone else.
  const size_t block = 100003;
  std::vector<float> big(block * static_cast<size_t>(g_size), 1.0f), small(block, 1.0f);
  const std::vector<uint64_t> before = bytes_sent_per_peer(g_comm);
  ASSERT_EQ(rrReduceScatter(big.data(), small.data(), block, rrFloat32, rrSum, g_comm, nullptr), rrSuccess);
  const std::vector<uint64_t> middle = bytes_sent_per_peer(g_comm);
  ASSERT_EQ(rrAllGather(small.data(), big.data(), block, rrFloat32, g_comm, nullptr), rrSuccess);
  const std::vector<uint64_t> after = bytes_sent_per_peer(g_comm);
  const uint64_t expect = static_cast<uint64_t>(g_size - 1) * block * sizeof(float) + header_bytes_per_call();
  uint64_t rs = 0, ag = 0;
  for (int p = 0; p < g_size; ++p) {
    rs += middle[static_cast<size_t>(p)] - before[static_cast<size_t>(p)];
    ag += after[static_cast<size_t>(p)] - middle[static_cast<size_t>(p)];
  }
  EXPECT_EQ(rs, expect);
  EXPECT_EQ(ag, expect);
  for (float x : big) ASSERT_EQ(x, static_cast<float>(g_size));
}

TEST(AllReduce, SendsTwoNMinusOneOverNBytes) {
  // The proof of bandwidth optimality: each rank's payload to its right
  // neighbour is exactly the segments the schedule sends, i.e. 2(N-1)/N of
  // the buffer up to the rounding of uneven segments, and nothing else.
  const size_t count = 1000003;  // prime: uneven segments
  const size_t bytes = count * sizeof(float);
  const RingPlace ring = ring_place(g_comm);
  std::vector<float> send(count, 1.0f), recv(count);
  std::vector<uint64_t> before_sent(static_cast<size_t>(g_size)), before_recv(static_cast<size_t>(g_size));
  for (int p = 0; p < g_size; ++p) {
    ASSERT_EQ(rrCommGetPeerBytes(g_comm, p, &before_sent[static_cast<size_t>(p)], &before_recv[static_cast<size_t>(p)]), rrSuccess);
  }
  ASSERT_EQ(rrAllReduce(send.data(), recv.data(), count, rrFloat32, rrSum, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
  uint64_t sent = 0, received = 0;
  for (int p = 0; p < g_size; ++p) {
    uint64_t s = 0, r = 0;
    ASSERT_EQ(rrCommGetPeerBytes(g_comm, p, &s, &r), rrSuccess);
    sent += s - before_sent[static_cast<size_t>(p)];
    received += r - before_recv[static_cast<size_t>(p)];
    // The data goes to the next rank of the ring's order (RR_RING_ORDER:
    // each host's ranks together), the argument check's header to the
    // neighbours by rank number; nothing to anyone else.
    const bool neighbour = p == (g_rank + 1) % g_size || p == (g_rank + g_size - 1) % g_size;
    const uint64_t header = g_size > 1 && neighbour ? 32 : 0;
    if (g_size > 1 && p != ring.right) {
      EXPECT_EQ(s - before_sent[static_cast<size_t>(p)], header) << "sent data to rank " << p << ", not the ring's next";
    }
  }
  // Exact figure: over its 2(N-1) steps the rank at ring position q sends
  // segments q, q-1, ..., q-2N+3 (mod N); segment s is block order[s].
  uint64_t exact = 0;
  const size_t n = static_cast<size_t>(g_size);
  for (int step = 0; g_size > 1 && step < 2 * (g_size - 1); ++step) {
    const int seg = ((ring.position - step) % g_size + g_size) % g_size;
    const size_t block = static_cast<size_t>(ring.order[static_cast<size_t>(seg)]);
    exact += (count / n + (block < count % n ? 1 : 0)) * sizeof(float);
  }
  EXPECT_EQ(sent, exact + header_bytes_per_call());
  sent -= header_bytes_per_call();
  received -= header_bytes_per_call();
  const double ideal = 2.0 * (g_size - 1) / g_size * static_cast<double>(bytes);
  EXPECT_LE(std::fabs(static_cast<double>(sent) - ideal), 2.0 * (g_size - 1) * sizeof(float));
  EXPECT_LE(std::fabs(static_cast<double>(received) - ideal), 2.0 * (g_size - 1) * sizeof(float));
}

}  // namespace
