// The ring's and the chain's primitives (algo/primitive.hpp) and how they run
// (exec/primitives.hpp): which step is which primitive, what each does to
// separate and to shared places, and a whole ring simulated in one process
// on nothing but the schedule's primitives, RingBuffers and run_primitive,
// checked against a float64 reference for every phase, rank count, count,
// chunk size, ring order and op. Both ring executors run these primitives,
// so a wrong step here is wrong in both.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algo/chain.hpp"
#include "algo/primitive.hpp"
#include "algo/ring.hpp"
#include "exec/call.hpp"
#include "exec/primitives.hpp"

namespace rr {
namespace {

using algo::Primitive;
using algo::RingPhases;

std::string sequence(const algo::RingSchedule& s) {
  std::string out;
  for (int step = s.first_step(); step < s.end_step(); ++step) {
    if (!out.empty()) out += ' ';
    out += algo::primitive_name(s.primitive(step));
  }
  return out;
}

TEST(Primitives, WhatEachDoes) {
  struct Row {
    Primitive p;
    const char* name;
    bool receives, reduces, keeps, forwards, finishes;
  };
  const Row rows[] = {
      {Primitive::kSend, "send", false, false, false, true, false},
      {Primitive::kCopySend, "copySend", false, false, true, true, false},
      {Primitive::kRecvReduceSend, "recvReduceSend", true, true, false, true, false},
      {Primitive::kRecvReduceCopySend, "recvReduceCopySend", true, true, true, true, true},
      {Primitive::kRecvReduceCopy, "recvReduceCopy", true, true, true, false, true},
      {Primitive::kRecvCopySend, "recvCopySend", true, false, true, true, false},
      {Primitive::kRecv, "recv", true, false, true, false, false},
  };
  for (const Row& r : rows) {
    EXPECT_STREQ(algo::primitive_name(r.p), r.name);
    EXPECT_EQ(algo::receives(r.p), r.receives) << r.name;
    EXPECT_EQ(algo::reduces(r.p), r.reduces) << r.name;
    EXPECT_EQ(algo::keeps(r.p), r.keeps) << r.name;
    EXPECT_EQ(algo::forwards(r.p), r.forwards) << r.name;
    EXPECT_EQ(algo::finishes(r.p), r.finishes) << r.name;
  }
}

// As NCCL's ring allreduce: N - 2 recvReduceSend, one recvReduceCopySend,
// N - 2 recvCopySend, one recv (after each column's send).
TEST(Primitives, RingSteps) {
  EXPECT_EQ(sequence(algo::RingSchedule(2, 0, 100, 8)), "recvReduceCopySend recv");
  EXPECT_EQ(sequence(algo::RingSchedule(4, 1, 100, 8)),
            "recvReduceSend recvReduceSend recvReduceCopySend recvCopySend recvCopySend recv");
  EXPECT_EQ(sequence(algo::RingSchedule(4, 1, 100, 8, -1, RingPhases::kReduceScatter)),
            "recvReduceSend recvReduceSend recvReduceCopy");
  EXPECT_EQ(sequence(algo::RingSchedule(2, 1, 100, 8, -1, RingPhases::kReduceScatter)), "recvReduceCopy");
  EXPECT_EQ(sequence(algo::RingSchedule(4, 3, 100, 8, -1, RingPhases::kAllGather)),
            "recvCopySend recvCopySend recv");
  EXPECT_EQ(sequence(algo::RingSchedule(2, 0, 100, 8, -1, RingPhases::kAllGather)), "recv");
  EXPECT_EQ(sequence(algo::RingSchedule(1, 0, 100, 8)), "");
}

TEST(Primitives, ChainPositions) {
  // Broadcast from 2 on 4 ranks in rank order: 2 heads, 3 and 0 pass on, 1 ends.
  EXPECT_EQ(algo::ChainSchedule(4, 2, 2, false).primitive(), Primitive::kCopySend);
  EXPECT_EQ(algo::ChainSchedule(4, 3, 2, false).primitive(), Primitive::kRecvCopySend);
  EXPECT_EQ(algo::ChainSchedule(4, 0, 2, false).primitive(), Primitive::kRecvCopySend);
  EXPECT_EQ(algo::ChainSchedule(4, 1, 2, false).primitive(), Primitive::kRecv);
  // Reduce to 2: 3 heads, 0 and 1 add theirs, the root ends it.
  EXPECT_EQ(algo::ChainSchedule(4, 3, 2, true).primitive(), Primitive::kSend);
  EXPECT_EQ(algo::ChainSchedule(4, 0, 2, true).primitive(), Primitive::kRecvReduceSend);
  EXPECT_EQ(algo::ChainSchedule(4, 1, 2, true).primitive(), Primitive::kRecvReduceSend);
  EXPECT_EQ(algo::ChainSchedule(4, 2, 2, true).primitive(), Primitive::kRecvReduceCopy);
}

exec::Call call_of(const void* send, void* recv, size_t count, rrRedOp_t op) {
  exec::Call call;
  call.send = send;
  call.recv = recv;
  call.count = count;
  call.dtype = rrFloat64;
  call.op = op;
  return call;
}

// Separate places (the slot rings: the chunk is read from one slot and the
// result written to another) and shared ones (the transport: the chunk
// arrives in the output, or a partial result is reduced where it arrived).
TEST(Primitives, SeparateAndSharedPlaces) {
  const std::vector<double> mine{1, 2, 3}, arrived_values{10, 20, 30};
  const std::vector<double> sum{11, 22, 33}, avg_of_two{5.5, 11, 16.5}, none{-1, -1, -1};
  struct Case {
    Primitive p;
    rrRedOp_t op;
    std::vector<double> keep, forward;  // expected; none: untouched
  };
  const Case cases[] = {
      {Primitive::kSend, rrSum, none, mine},
      {Primitive::kCopySend, rrSum, mine, mine},
      {Primitive::kRecvReduceSend, rrSum, none, sum},
      {Primitive::kRecvReduceSend, rrAvg, none, sum},  // a partial result is not divided
      {Primitive::kRecvReduceCopySend, rrAvg, avg_of_two, avg_of_two},
      {Primitive::kRecvReduceCopy, rrSum, sum, none},
      {Primitive::kRecvCopySend, rrSum, arrived_values, arrived_values},
      {Primitive::kRecv, rrSum, arrived_values, none},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(algo::primitive_name(c.p));
    std::vector<double> arrived = arrived_values, keep = none, forward = none;
    const exec::Call call = call_of(mine.data(), keep.data(), 3, c.op);
    exec::ChunkPlaces at;
    at.mine = mine.data();
    at.arrived = arrived.data();
    at.keep = keep.data();
    at.forward = forward.data();
    at.count = 3;
    ASSERT_TRUE(exec::run_primitive(c.p, call, 2, at).ok());
    EXPECT_EQ(keep, algo::keeps(c.p) ? c.keep : none);
    EXPECT_EQ(forward, algo::forwards(c.p) ? c.forward : none);
    EXPECT_EQ(arrived, arrived_values) << "what arrived is only read";

    // Shared: the transport's chunk arrives in the output and is sent on from
    // there; a partial result stays where it arrived.
    std::vector<double> output = c.p == Primitive::kRecvCopySend || c.p == Primitive::kRecv ? arrived_values : none;
    std::vector<double> staged = arrived_values;
    exec::ChunkPlaces shared;
    shared.mine = mine.data();
    shared.count = 3;
    if (algo::receives(c.p)) shared.arrived = algo::reduces(c.p) ? staged.data() : output.data();
    if (algo::keeps(c.p)) shared.keep = output.data();
    if (algo::forwards(c.p)) {
      shared.forward = !algo::receives(c.p) ? const_cast<double*>(mine.data())
                       : c.p == Primitive::kRecvReduceSend ? staged.data()
                                                            : output.data();
    }
    ASSERT_TRUE(exec::run_primitive(c.p, call, 2, shared).ok());
    if (algo::keeps(c.p)) {
      EXPECT_EQ(output, c.keep);
    }
    if (c.p == Primitive::kRecvReduceSend) {
      EXPECT_EQ(staged, c.forward);
    }
  }
}

// Every rank's ring in one process, in lockstep: the chunk rank r forwards
// at step k is what its right neighbour takes at step k + 1 (the first
// send is step first_step()'s input). Nothing but the schedule's primitives
// and RingBuffers' places moves data.
void simulate(int n, size_t count, size_t chunk_elems, RingPhases phases, rrRedOp_t op, const int* order,
              std::mt19937& rng) {
  const int shift = phases == RingPhases::kBoth ? 0 : -1;
  std::vector<algo::RingSchedule> ranks;
  for (int r = 0; r < n; ++r) ranks.emplace_back(n, r, count, chunk_elems, shift, phases, order);
  // Whole-buffer inputs; each phase's buffers are cut from them (call.hpp).
  std::uniform_real_distribution<double> value(-4, 4);
  std::vector<std::vector<double>> whole(n, std::vector<double>(count));
  for (auto& w : whole)
    for (double& v : w) v = std::round(value(rng) * 8) / 8;  // exact sums in any order
  std::vector<double> expected(count);
  for (size_t i = 0; i < count; ++i) {
    double acc = whole[0][i];
    for (int r = 1; r < n; ++r) acc = op == rrMax ? std::max(acc, whole[r][i]) : acc + whole[r][i];
    expected[i] = op == rrAvg ? acc / n : acc;
  }
  std::vector<std::vector<double>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    const algo::Range block = algo::split(count, static_cast<size_t>(n), static_cast<size_t>(r));
    if (phases == RingPhases::kAllGather) {
      send[r].assign(whole[r].begin() + block.offset, whole[r].begin() + block.offset + block.count);
      // Each rank's own block is in its input; the gather delivers the others.
      for (int q = 0; q < n; ++q) {
        const algo::Range b = algo::split(count, static_cast<size_t>(n), static_cast<size_t>(q));
        for (size_t i = b.offset; i < b.offset + b.count; ++i) expected[i] = whole[q][i];
      }
    } else {
      send[r] = whole[r];
    }
    recv[r].assign(phases == RingPhases::kReduceScatter ? block.count : count, -99);
    // All-gather's own block is the communicator's local copy, not the ring's.
    if (phases == RingPhases::kAllGather) std::copy(send[r].begin(), send[r].end(), recv[r].begin() + block.offset);
  }
  std::vector<exec::Call> calls;
  for (int r = 0; r < n; ++r) calls.push_back(call_of(send[r].data(), recv[r].data(), count, op));
  std::vector<exec::RingBuffers> buffers;
  for (int r = 0; r < n; ++r) buffers.emplace_back(ranks[r], calls[r]);

  const algo::RingSchedule& s0 = ranks[0];
  for (size_t column = 0; column < s0.columns(); ++column) {
    // out[r]: what rank r sent at the last step, for its right neighbour.
    std::vector<std::vector<double>> out(n);
    for (int r = 0; r < n; ++r) {
      const algo::Range own = ranks[r].chunk(ranks[r].send_segment(s0.first_step()), column);
      out[r].assign(own.count, -77);
      exec::ChunkPlaces at;
      at.mine = buffers[r].input(own);
      at.forward = out[r].data();
      at.count = own.count;
      ASSERT_TRUE(exec::run_primitive(Primitive::kSend, calls[r], n, at).ok());
    }
    for (int step = s0.first_step(); step < s0.end_step(); ++step) {
      std::vector<std::vector<double>> next(n);
      for (int r = 0; r < n; ++r) {
        const algo::RingSchedule& s = ranks[r];
        const algo::Range in = s.chunk(s.recv_segment(step), column);
        const std::vector<double>& arrived = out[s.left()];
        ASSERT_EQ(arrived.size(), in.count) << "rank " << r << " step " << step;
        const Primitive p = s.primitive(step);
        next[r].assign(in.count, -77);
        exec::ChunkPlaces at;
        if (algo::reduces(p)) at.mine = buffers[r].mine(in);
        at.arrived = arrived.data();
        if (algo::keeps(p)) at.keep = buffers[r].output(in);
        if (algo::forwards(p)) at.forward = next[r].data();
        at.count = in.count;
        ASSERT_TRUE(exec::run_primitive(p, calls[r], n, at).ok());
        if (!algo::forwards(p)) next[r].clear();
      }
      out.swap(next);
    }
    // The last step sends nothing: a chunk nobody takes would sit in the
    // right neighbour's slot ring into the next call.
    for (int r = 0; r < n; ++r) ASSERT_TRUE(out[r].empty()) << "rank " << r << " sent past the last step";
  }
  for (int r = 0; r < n; ++r) {
    if (phases == RingPhases::kReduceScatter) {
      const algo::Range block = algo::split(count, static_cast<size_t>(n), static_cast<size_t>(r));
      for (size_t i = 0; i < block.count; ++i)
        ASSERT_EQ(recv[r][i], expected[block.offset + i]) << "rank " << r << " element " << i;
    } else {
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r][i], expected[i]) << "rank " << r << " element " << i;
    }
  }
}

TEST(Primitives, WholeRingAgainstFloat64Reference) {
  std::mt19937 rng(7);
  // One rank is a local copy (the communicator's), not a ring.
  for (int n = 2; n <= 7; ++n) {
    std::vector<int> shuffled(n);
    for (int r = 0; r < n; ++r) shuffled[r] = (r * 3 + 1) % n;  // a permutation when gcd(3, n) = 1
    const bool permutation = n % 3 != 0;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100}, size_t{1001}})
      for (size_t chunk : {size_t{1}, size_t{3}, size_t{64}})
        for (RingPhases phases : {RingPhases::kBoth, RingPhases::kReduceScatter, RingPhases::kAllGather})
          for (rrRedOp_t op : {rrSum, rrAvg, rrMax})
            for (bool reorder : {false, true}) {
              if (reorder && !permutation) continue;
              SCOPED_TRACE("n " + std::to_string(n) + " count " + std::to_string(count) + " chunk " +
                           std::to_string(chunk) + " phases " + std::to_string(static_cast<int>(phases)) + " op " +
                           std::to_string(op) + (reorder ? " reordered" : ""));
              simulate(n, count, chunk, phases, op, reorder ? shuffled.data() : nullptr, rng);
              if (HasFatalFailure()) return;
            }
  }
}

}  // namespace
}  // namespace rr
