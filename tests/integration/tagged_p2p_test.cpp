// Tagged point-to-point (rrIsendTag, rrIrecvTag), any-source receives
// (RR_ANY_SOURCE) and what a finished request reports (rrWaitStatus,
// rrTestStatus). Each rank sends to its right neighbour and receives from
// its left (on one rank: itself). Part of collectives_test
// (collectives_env.hpp).

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives_env.hpp"

namespace {

using namespace collectives_env;

int right() { return (g_rank + 1) % g_size; }
int left() { return (g_rank + g_size - 1) % g_size; }

// A message's payload: who sent it and which one it is, in every element.
std::vector<int32_t> payload(int sender, int which, size_t count) {
  return std::vector<int32_t>(count, sender * 1000 + which);
}

void expect_status(const rrStatus_t& status, int source, int tag, size_t count) {
  EXPECT_EQ(status.source, source);
  EXPECT_EQ(status.tag, tag);
  EXPECT_EQ(status.count, count);
}

// Sent tag 1 then tag 2, received tag 2 then tag 1: each receive takes the
// message of its tag. The sizes differ (one takes UCX's rendezvous), so a
// receive that took the other tag's message would fail on the length.
TEST(TaggedP2p, DifferentTagsMatchIndependently) {
  const size_t small = 37, large = 300007;
  const std::vector<int32_t> one = payload(g_rank, 1, large), two = payload(g_rank, 2, small);
  std::vector<int32_t> got_one(large, -1), got_two(small, -1);
  rrRequest_t send_one = nullptr, send_two = nullptr, recv_two = nullptr, recv_one = nullptr;
  ASSERT_EQ(rrIsendTag(one.data(), large, rrInt32, right(), 1, g_comm, &send_one), rrSuccess) << rrGetLastError(g_comm);
  ASSERT_EQ(rrIsendTag(two.data(), small, rrInt32, right(), 2, g_comm, &send_two), rrSuccess) << rrGetLastError(g_comm);
  ASSERT_EQ(rrIrecvTag(got_two.data(), small, rrInt32, left(), 2, g_comm, &recv_two), rrSuccess);
  rrStatus_t status{};
  ASSERT_EQ(rrWaitStatus(recv_two, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), 2, small);
  EXPECT_EQ(got_two, payload(left(), 2, small));
  ASSERT_EQ(rrIrecvTag(got_one.data(), large, rrInt32, left(), 1, g_comm, &recv_one), rrSuccess);
  ASSERT_EQ(rrWaitStatus(recv_one, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), 1, large);
  EXPECT_EQ(got_one, payload(left(), 1, large));
  // A send's status names this rank as the source.
  ASSERT_EQ(rrWaitStatus(send_two, &status), rrSuccess);
  expect_status(status, g_rank, 2, small);
  ASSERT_EQ(rrWaitStatus(send_one, nullptr), rrSuccess);  // status may be NULL
}

// Many messages of one tag arrive in the order sent; untagged calls are tag
// 0 and interleave with tagged ones of tag 0, blocking ones included.
TEST(TaggedP2p, SameTagMatchesInOrderAndTagZeroIsTheUntaggedCalls) {
  const size_t count = 1001;
  const int kMessages = 8;
  std::vector<std::vector<int32_t>> out, in(kMessages, std::vector<int32_t>(count, -1));
  std::vector<rrRequest_t> sends(kMessages), recvs(kMessages);
  // Receives first, alternating the two forms.
  for (int m = 0; m < kMessages; ++m) {
    auto& buf = in[static_cast<size_t>(m)];
    ASSERT_EQ(m % 2 ? rrIrecv(buf.data(), count, rrInt32, left(), g_comm, &recvs[static_cast<size_t>(m)])
                    : rrIrecvTag(buf.data(), count, rrInt32, left(), 0, g_comm, &recvs[static_cast<size_t>(m)]),
              rrSuccess)
        << rrGetLastError(g_comm);
  }
  for (int m = 0; m < kMessages; ++m) {
    out.push_back(payload(g_rank, m, count));
    const int32_t* data = out.back().data();
    ASSERT_EQ(m % 3 ? rrIsendTag(data, count, rrInt32, right(), 0, g_comm, &sends[static_cast<size_t>(m)])
                    : rrIsend(data, count, rrInt32, right(), g_comm, &sends[static_cast<size_t>(m)]),
              rrSuccess)
        << rrGetLastError(g_comm);
  }
  for (int m = kMessages - 1; m >= 0; --m) {
    rrStatus_t status{};
    ASSERT_EQ(rrWaitStatus(recvs[static_cast<size_t>(m)], &status), rrSuccess) << rrGetLastError(g_comm);
    expect_status(status, left(), 0, count);
    ASSERT_EQ(rrWait(sends[static_cast<size_t>(m)]), rrSuccess) << rrGetLastError(g_comm);
  }
  for (int m = 0; m < kMessages; ++m) {
    EXPECT_EQ(in[static_cast<size_t>(m)], payload(left(), m, count)) << "message " << m << " out of order";
  }
  // A blocking send matched by a tagged receive of tag 0 (not on one rank:
  // a blocking send to itself cannot complete).
  if (g_size > 1) {
    const std::vector<int32_t> last = payload(g_rank, 99, count);
    std::vector<int32_t> got(count, -1);
    rrRequest_t recv = nullptr;
    ASSERT_EQ(rrIrecvTag(got.data(), count, rrInt32, left(), 0, g_comm, &recv), rrSuccess);
    ASSERT_EQ(rrSend(last.data(), count, rrInt32, right(), g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    ASSERT_EQ(rrWait(recv), rrSuccess) << rrGetLastError(g_comm);
    EXPECT_EQ(got, payload(left(), 99, count));
  }
}

// Each rank in turn receives from RR_ANY_SOURCE, once per other rank, and
// must see every other rank exactly once, each with its own data. Before
// their tag-7 message every other rank also sends it one of tag 8, which no
// any-source receive of tag 7 may take.
TEST(TaggedP2p, AnySourceReceivesFromEveryOtherRankAndReportsEach) {
  const size_t count = 513;
  for (int root = 0; root < g_size; ++root) {
    SCOPED_TRACE("receiving rank " + std::to_string(root));
    if (g_rank != root) {
      const std::vector<int32_t> decoy = payload(g_rank, 8, count), data = payload(g_rank, 7, count);
      rrRequest_t first = nullptr, second = nullptr;
      ASSERT_EQ(rrIsendTag(decoy.data(), count, rrInt32, root, 8, g_comm, &first), rrSuccess);
      ASSERT_EQ(rrIsendTag(data.data(), count, rrInt32, root, 7, g_comm, &second), rrSuccess);
      ASSERT_EQ(rrWait(first), rrSuccess) << rrGetLastError(g_comm);
      ASSERT_EQ(rrWait(second), rrSuccess) << rrGetLastError(g_comm);
    } else {
      const size_t others = static_cast<size_t>(g_size - 1);
      std::vector<std::vector<int32_t>> in(others, std::vector<int32_t>(count, -1));
      std::vector<rrRequest_t> recvs(others);
      for (size_t k = 0; k < others; ++k) {
        ASSERT_EQ(rrIrecvTag(in[k].data(), count, rrInt32, RR_ANY_SOURCE, 7, g_comm, &recvs[k]), rrSuccess)
            << rrGetLastError(g_comm);
      }
      std::vector<int> sources;
      for (size_t k = 0; k < others; ++k) {
        rrStatus_t status{};
        ASSERT_EQ(rrWaitStatus(recvs[k], &status), rrSuccess) << rrGetLastError(g_comm);
        EXPECT_EQ(status.tag, 7);
        EXPECT_EQ(status.count, count);
        ASSERT_TRUE(status.source >= 0 && status.source < g_size && status.source != root) << status.source;
        EXPECT_EQ(in[k], payload(status.source, 7, count)) << "the data is not from the rank the status names";
        sources.push_back(status.source);
      }
      std::sort(sources.begin(), sources.end());
      std::vector<int> expected;
      for (int r = 0; r < g_size; ++r) {
        if (r != root) expected.push_back(r);
      }
      EXPECT_EQ(sources, expected) << "each other rank once";
      // The tag-8 messages waited, unmatched, for receives of their own.
      for (int r = 0; r < g_size; ++r) {
        if (r == root) continue;
        std::vector<int32_t> decoy(count, -1);
        rrRequest_t recv = nullptr;
        ASSERT_EQ(rrIrecvTag(decoy.data(), count, rrInt32, r, 8, g_comm, &recv), rrSuccess);
        ASSERT_EQ(rrWait(recv), rrSuccess) << rrGetLastError(g_comm);
        EXPECT_EQ(decoy, payload(r, 8, count));
      }
    }
    ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);
  }
}

// rrIrecv takes RR_ANY_SOURCE too (tag 0), and an empty message is still a
// message: its receive learns who sent it.
TEST(TaggedP2p, AnySourceWithUntaggedAndEmptyMessages) {
  int32_t word = g_rank, got = -1;
  rrRequest_t send = nullptr, recv = nullptr, empty_send = nullptr, empty_recv = nullptr;
  ASSERT_EQ(rrIrecv(&got, 1, rrInt32, RR_ANY_SOURCE, g_comm, &recv), rrSuccess) << rrGetLastError(g_comm);
  ASSERT_EQ(rrIsend(&word, 1, rrInt32, right(), g_comm, &send), rrSuccess);
  rrStatus_t status{};
  ASSERT_EQ(rrWaitStatus(recv, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), 0, 1);
  EXPECT_EQ(got, left());
  ASSERT_EQ(rrWait(send), rrSuccess);
  ASSERT_EQ(rrIrecvTag(nullptr, 0, rrFloat64, RR_ANY_SOURCE, 3, g_comm, &empty_recv), rrSuccess);
  ASSERT_EQ(rrIsendTag(nullptr, 0, rrFloat64, right(), 3, g_comm, &empty_send), rrSuccess);
  ASSERT_EQ(rrWaitStatus(empty_recv, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), 3, 0);
  ASSERT_EQ(rrWait(empty_send), rrSuccess);
}

// rrTestStatus writes the status only once it reports done; a collective
// request's status has no source, tag or count.
TEST(TaggedP2p, TestStatusWritesTheStatusOnlyWhenDone) {
  const size_t count = 200003;
  const std::vector<int32_t> out = payload(g_rank, 5, count);
  std::vector<int32_t> in(count, -1);
  rrRequest_t recv = nullptr, send = nullptr;
  ASSERT_EQ(rrIrecvTag(in.data(), count, rrInt32, RR_ANY_SOURCE, 12345, g_comm, &recv), rrSuccess);
  // Nothing was sent yet: not done, and the status is left alone.
  rrStatus_t status{-7, -7, 7};
  int done = 1;
  ASSERT_EQ(rrTestStatus(recv, &done, &status), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(done, 0);
  expect_status(status, -7, -7, 7);
  ASSERT_EQ(rrBarrier(g_comm, nullptr), rrSuccess);  // every receive is posted before any send
  ASSERT_EQ(rrIsendTag(out.data(), count, rrInt32, right(), 12345, g_comm, &send), rrSuccess);
  while (!done) ASSERT_EQ(rrTestStatus(recv, &done, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), 12345, count);
  EXPECT_EQ(in, payload(left(), 5, count));
  done = 0;
  while (!done) ASSERT_EQ(rrTestStatus(send, &done, nullptr), rrSuccess) << rrGetLastError(g_comm);
  EXPECT_EQ(rrTestStatus(send, &done, &status), rrInvalidUsage) << "a finished request is gone";
  EXPECT_EQ(rrTestStatus(send, nullptr, &status), rrInvalidArgument);

  float x = 1.0f;
  rrRequest_t collective = nullptr;
  ASSERT_EQ(rrAllReduceAsync(&x, &x, 1, rrFloat32, rrSum, g_comm, &collective), rrSuccess);
  ASSERT_EQ(rrWaitStatus(collective, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, -1, -1, 0);
  EXPECT_EQ(x, static_cast<float>(g_size));
}

TEST(TaggedP2p, LargestTagWorks) {
  int32_t word = g_rank, got = -1;
  rrRequest_t send = nullptr, recv = nullptr;
  ASSERT_EQ(rrIrecvTag(&got, 1, rrInt32, left(), INT32_MAX, g_comm, &recv), rrSuccess);
  ASSERT_EQ(rrIsendTag(&word, 1, rrInt32, right(), INT32_MAX, g_comm, &send), rrSuccess);
  rrStatus_t status{};
  ASSERT_EQ(rrWaitStatus(recv, &status), rrSuccess) << rrGetLastError(g_comm);
  expect_status(status, left(), INT32_MAX, 1);
  ASSERT_EQ(rrWait(send), rrSuccess);
}

TEST(TaggedP2p, BadPeersAndTagsAreNamed) {
  int32_t word = 0;
  rrRequest_t request = nullptr;
  auto expect = [&](rrResult_t result, const std::string& text) {
    EXPECT_EQ(result, rrInvalidArgument) << text;
    const std::string error = rrGetLastError(g_comm);
    EXPECT_NE(error.find(text), std::string::npos) << error;
  };
  expect(rrIsendTag(&word, 1, rrInt32, right(), -1, g_comm, &request), "rrIsendTag: tag=-1 is negative");
  expect(rrIrecvTag(&word, 1, rrInt32, RR_ANY_SOURCE, -5, g_comm, &request), "rrIrecvTag: tag=-5 is negative");
  expect(rrIsendTag(&word, 1, rrInt32, RR_ANY_SOURCE, 1, g_comm, &request),
         "rrIsendTag: peer=RR_ANY_SOURCE (-2) is for receives only");
  expect(rrIsend(&word, 1, rrInt32, RR_ANY_SOURCE, g_comm, &request), "rrIsend: peer=RR_ANY_SOURCE");
  expect(rrIrecvTag(&word, 1, rrInt32, g_size, 1, g_comm, &request),
         "rrIrecvTag: peer=" + std::to_string(g_size) + " out of range");
  expect(rrIrecvTag(&word, 1, rrInt32, -1, 1, g_comm, &request), "rrIrecvTag: peer=-1 out of range");
  expect(rrRecv(&word, 1, rrInt32, RR_ANY_SOURCE, g_comm, nullptr), "rrRecv: peer=RR_ANY_SOURCE");
  expect(rrIrecvTag(&word, 1, rrInt32, RR_ANY_SOURCE, 1, g_comm, nullptr), "rrIrecvTag: request is NULL");
  EXPECT_EQ(request, nullptr) << "a refused call wrote its request";
}

// An any-source receive smaller than the message it matched fails naming
// the rank that sent it; a receive that is larger, too.
TEST(TaggedP2p, AnySourceReceiveOfAnotherLengthNamesTheSender) {
  if (g_size < 2) GTEST_SKIP() << "needs two ranks";
  if (g_rank > 1) return;
  std::vector<int8_t> big(64, 7), small(16), larger(128);
  if (g_rank == 0) {
    ASSERT_EQ(rrSend(big.data(), big.size(), rrInt8, 1, g_comm, nullptr), rrSuccess) << rrGetLastError(g_comm);
    rrRequest_t r = nullptr;
    ASSERT_EQ(rrIsendTag(big.data(), big.size(), rrInt8, 1, 4, g_comm, &r), rrSuccess);
    ASSERT_EQ(rrWait(r), rrSuccess) << rrGetLastError(g_comm);
  } else {
    rrRequest_t r = nullptr;
    ASSERT_EQ(rrIrecv(small.data(), small.size(), rrInt8, RR_ANY_SOURCE, g_comm, &r), rrSuccess);
    rrStatus_t status{-7, -7, 7};
    EXPECT_EQ(rrWaitStatus(r, &status), rrRemoteError);
    std::string error = rrGetLastError(g_comm);
    EXPECT_NE(error.find("receive of 16 bytes from rank 0"), std::string::npos) << error;
    expect_status(status, -7, -7, 7);  // not written on failure
    ASSERT_EQ(rrIrecvTag(larger.data(), larger.size(), rrInt8, RR_ANY_SOURCE, 4, g_comm, &r), rrSuccess);
    EXPECT_EQ(rrWait(r), rrRemoteError);
    error = rrGetLastError(g_comm);
    EXPECT_NE(error.find("rank 0 sent 64 bytes, expected 128"), std::string::npos) << error;
  }
}

}  // namespace
