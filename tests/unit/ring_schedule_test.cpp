// The ring's arithmetic on its own: every send has its receive, every element
// is reduced exactly once per rank, and simulating the schedule symbolically
// leaves every rank holding every rank's contribution to every element.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "algo/ring.hpp"

namespace rr::algo {
namespace {

TEST(Split, CoversTheRangeWithoutGapsLongerPartsFirst) {
  for (size_t count = 0; count < 40; ++count) {
    for (size_t parts = 1; parts < 12; ++parts) {
      size_t next = 0;
      for (size_t i = 0; i < parts; ++i) {
        Range r = split(count, parts, i);
        EXPECT_EQ(r.offset, next);
        EXPECT_TRUE(r.count == count / parts || r.count == count / parts + 1);
        if (i > 0) {
          EXPECT_LE(r.count, split(count, parts, i - 1).count);
        }
        next += r.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

struct Message {
  int step;
  size_t column;
  Range range;
};

// Runs the schedule for (n, count, chunk) and checks it element by element;
// `order` (empty: rank order) is the ring's order of the ranks.
void check_schedule(int n, size_t count, size_t chunk_elems, const std::vector<int>& order = {}) {
  SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count) + " chunk=" + std::to_string(chunk_elems) +
               (order.empty() ? "" : " (reordered ring)"));
  std::vector<RingSchedule> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back(n, r, count, chunk_elems, 0, RingPhases::kBoth, order.empty() ? nullptr : order.data());
  }
  const size_t columns = ranks[0].columns();
  for (const auto& s : ranks) ASSERT_EQ(s.columns(), columns) << "ranks disagree on the column count";

  // contributions[rank][element]: bit q set = rank q's input is in it.
  std::vector<std::vector<uint32_t>> held(n, std::vector<uint32_t>(count));
  for (int r = 0; r < n; ++r)
    for (size_t e = 0; e < count; ++e) held[r][e] = 1u << r;
  std::vector<std::vector<int>> reduced(n, std::vector<int>(count, 0));
  std::vector<std::vector<int>> gathered(n, std::vector<int>(count, 0));

  const int steps = ranks[0].steps();
  EXPECT_EQ(steps, 2 * (n - 1));
  for (int step = 0; step < steps; ++step) {
    // Everyone sends first (the values as of the end of the previous step), then receives.
    std::vector<std::vector<std::pair<Range, std::vector<uint32_t>>>> in_flight(n);
    for (int r = 0; r < n; ++r) {
      const RingSchedule& s = ranks[r];
      for (size_t c = 0; c < columns; ++c) {
        Range sent = s.chunk(s.send_segment(step), c);
        Range expected = ranks[s.right()].chunk(ranks[s.right()].recv_segment(step), c);
        // Every send is matched by a receive of the same length at the neighbour.
        ASSERT_EQ(sent.offset, expected.offset);
        ASSERT_EQ(sent.count, expected.count);
        ASSERT_LE(sent.count, chunk_elems);
        std::vector<uint32_t> payload(held[r].begin() + sent.offset, held[r].begin() + sent.offset + sent.count);
        in_flight[s.right()].push_back({sent, payload});
      }
    }
    for (int r = 0; r < n; ++r) {
      for (auto& [range, payload] : in_flight[r]) {
        for (size_t i = 0; i < range.count; ++i) {
          const size_t e = range.offset + i;
          if (ranks[r].is_reduce_step(step)) {
            ASSERT_EQ(held[r][e] & payload[i], 0u) << "a contribution reduced twice at element " << e;
            held[r][e] |= payload[i];
            ++reduced[r][e];
          } else {
            held[r][e] = payload[i];
            ++gathered[r][e];
          }
        }
      }
    }
  }
  const uint32_t everyone = n == 32 ? ~0u : (1u << n) - 1;
  for (int r = 0; r < n; ++r) {
    // The segment a rank starts by sending: the one at its ring position.
    const Range own_input = ranks[r].segment(ranks[r].position());
    const Range owned = ranks[r].segment(ranks[r].owned_segment());
    for (size_t e = 0; e < count; ++e) {
      ASSERT_EQ(held[r][e], everyone) << "rank " << r << " element " << e;
      const bool in_own_input = e >= own_input.offset && e < own_input.offset + own_input.count;
      const bool in_owned = e >= owned.offset && e < owned.offset + owned.count;
      // Each rank reduces every element exactly once, except those of the segment it starts sending.
      EXPECT_EQ(reduced[r][e], (n > 1 && !in_own_input) ? 1 : 0) << "rank " << r << " element " << e;
      // ...and receives every element it does not own exactly once in the all-gather.
      EXPECT_EQ(gathered[r][e], (n > 1 && !in_owned) ? 1 : 0) << "rank " << r << " element " << e;
    }
  }
}

TEST(RingSchedule, EveryElementReducedOnceAndEverySendMatched) {
  for (int n = 1; n <= 16; ++n) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{5}, size_t{7}}) {
      const size_t chunks = 4;
      for (size_t count = 0; count <= n * chunks + 7; ++count) check_schedule(n, count, chunk);
    }
  }
}

TEST(RingSchedule, LargeOddSizes) {
  for (int n : {2, 3, 5, 8}) {
    check_schedule(n, 1001, 13);
    check_schedule(n, 4099, 64);
  }
}

// Orders a ring may take (algo/ring_order.hpp): reversed, two hosts
// interleaved (cyclic placement: evens, then odds), and shuffled.
std::vector<std::vector<int>> some_orders(int n) {
  std::vector<int> reversed, interleaved, shuffled;
  for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
  for (int r = 0; r < n; r += 2) interleaved.push_back(r);
  for (int r = 1; r < n; r += 2) interleaved.push_back(r);
  for (int r = 0; r < n; ++r) shuffled.push_back(r);
  uint32_t seed = 2463534242u + static_cast<uint32_t>(n);
  for (int i = n - 1; i > 0; --i) {
    seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
    std::swap(shuffled[static_cast<size_t>(i)], shuffled[seed % static_cast<uint32_t>(i + 1)]);
  }
  return {reversed, interleaved, shuffled};
}

TEST(RingSchedule, ReorderedRingReducesEveryElementOnceAndMatchesEverySend) {
  for (int n = 1; n <= 12; ++n) {
    for (const std::vector<int>& order : some_orders(n)) {
      for (size_t count = 0; count <= static_cast<size_t>(n) * 4 + 7; ++count) check_schedule(n, count, 3, order);
      check_schedule(n, 1001, 13, order);
    }
  }
}

TEST(RingSchedule, ReorderedRingNeighboursFollowTheOrder) {
  const std::vector<int> order = {0, 4, 1, 5, 2, 6, 3, 7};  // 8 ranks, 4 hosts, cyclic
  for (int p = 0; p < 8; ++p) {
    const RingSchedule s(8, order[static_cast<size_t>(p)], 100, 8, 0, RingPhases::kBoth, order.data());
    EXPECT_EQ(s.position(), p);
    EXPECT_EQ(s.right(), order[static_cast<size_t>((p + 1) % 8)]);
    EXPECT_EQ(s.left(), order[static_cast<size_t>((p + 7) % 8)]);
  }
}

TEST(RingSchedule, OwnedSegmentIsRightNeighbourOfRank) {
  for (int n = 1; n <= 9; ++n)
    for (int r = 0; r < n; ++r) EXPECT_EQ(RingSchedule(n, r, 100, 8).owned_segment(), (r + 1) % n);
}

TEST(RingSchedule, ColumnsFollowTheLargestSegment) {
  EXPECT_EQ(RingSchedule(4, 0, 0, 8).columns(), 0u);
  EXPECT_EQ(RingSchedule(4, 0, 3, 8).columns(), 1u);     // count < N: one column, some segments empty
  EXPECT_EQ(RingSchedule(4, 0, 33, 8).columns(), 2u);    // largest segment 9 > 8
  EXPECT_EQ(RingSchedule(4, 0, 32, 8).columns(), 1u);
  EXPECT_EQ(RingSchedule(1, 0, 100, 7).columns(), 15u);
}

}  // namespace
}  // namespace rr::algo

namespace rr::algo {
namespace {

// Reduce-scatter alone, rotated by -1: rank r ends holding every rank's
// contribution to segment r, having received each element at most once.
// ... in rank order and in reordered rings: rank r still ends with block r.
TEST(RingSchedule, RotatedReduceScatterLeavesRankROwningSegmentR) {
  for (int n = 2; n <= 9; ++n) {
    std::vector<std::vector<int>> orders = some_orders(n);
    orders.push_back({});
    for (const std::vector<int>& order : orders)
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{37}}) {
      std::vector<RingSchedule> ranks;
      for (int r = 0; r < n; ++r) {
        ranks.emplace_back(n, r, count, 3, -1, RingPhases::kReduceScatter, order.empty() ? nullptr : order.data());
      }
      std::vector<std::vector<uint32_t>> held(n, std::vector<uint32_t>(count));
      for (int r = 0; r < n; ++r)
        for (auto& e : held[r]) e = 1u << r;
      ASSERT_EQ(ranks[0].first_step(), 0);
      ASSERT_EQ(ranks[0].end_step(), n - 1);
      for (int step = ranks[0].first_step(); step < ranks[0].end_step(); ++step) {
        auto before = held;
        for (int r = 0; r < n; ++r) {
          const RingSchedule& s = ranks[r];
          for (size_t c = 0; c < s.columns(); ++c) {
            Range chunk = s.chunk(s.send_segment(step), c);
            Range theirs = ranks[s.right()].chunk(ranks[s.right()].recv_segment(step), c);
            ASSERT_EQ(chunk.offset, theirs.offset);
            ASSERT_EQ(chunk.count, theirs.count);
            for (size_t i = 0; i < chunk.count; ++i) {
              ASSERT_EQ(held[s.right()][chunk.offset + i] & before[r][chunk.offset + i], 0u);
              held[s.right()][chunk.offset + i] |= before[r][chunk.offset + i];
            }
          }
        }
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(ranks[r].owned_segment(), ranks[r].position());
        // Block r of the buffer, wherever the ring put rank r.
        const Range own = split(count, static_cast<size_t>(n), static_cast<size_t>(r));
        const Range owned = ranks[r].segment(ranks[r].owned_segment());
        EXPECT_EQ(owned.offset, own.offset);
        EXPECT_EQ(owned.count, own.count);
        for (size_t i = 0; i < own.count; ++i) EXPECT_EQ(held[r][own.offset + i], (1u << n) - 1);
      }
    }
  }
}

// All-gather alone: rank r starts with segment r and ends with all of them.
TEST(RingSchedule, RotatedAllGatherDeliversEverySegmentOnce) {
  for (int n = 2; n <= 9; ++n) {
    std::vector<std::vector<int>> orders = some_orders(n);
    orders.push_back({});
    for (const std::vector<int>& order : orders) {
    const size_t count = 11 * static_cast<size_t>(n);
    std::vector<RingSchedule> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back(n, r, count, 4, -1, RingPhases::kAllGather, order.empty() ? nullptr : order.data());
    }
    std::vector<std::vector<int>> copies(n, std::vector<int>(count, 0));
    for (int r = 0; r < n; ++r) {
      // Each rank starts with its own block r.
      const Range own = split(count, static_cast<size_t>(n), static_cast<size_t>(r));
      const Range first = ranks[r].segment(ranks[r].send_segment(ranks[r].first_step()));
      EXPECT_EQ(first.offset, own.offset) << "rank " << r << " starts the all-gather with another block";
      for (size_t i = 0; i < own.count; ++i) copies[r][own.offset + i] = 1;
    }
    ASSERT_EQ(ranks[0].first_step(), n - 1);
    ASSERT_EQ(ranks[0].end_step(), 2 * (n - 1));
    for (int step = ranks[0].first_step(); step < ranks[0].end_step(); ++step) {
      auto before = copies;
      for (int r = 0; r < n; ++r) {
        const RingSchedule& s = ranks[r];
        for (size_t c = 0; c < s.columns(); ++c) {
          Range chunk = s.chunk(s.send_segment(step), c);
          for (size_t i = 0; i < chunk.count; ++i) {
            ASSERT_EQ(before[r][chunk.offset + i], 1) << "rank " << r << " forwards what it does not have";
            copies[s.right()][chunk.offset + i] += 1;
          }
        }
      }
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(copies[r][i], 1) << "rank " << r << " element " << i;
    }
  }
}

// Where the executors read and write: send_offset and recv_offset put a
// chunk inside the call's buffers, whose extent depends on the phases
// (all-gather's send is this rank's segment, reduce-scatter's recv the owned
// one): every chunk of every step lands inside, and the ones the phase
// reads from send or writes to recv at the expected element.
TEST(RingSchedule, EveryChunkSitsInsideTheBuffersOfItsPhase) {
  for (int n = 1; n <= 7; ++n) {
    std::vector<std::vector<int>> orders = some_orders(n);
    orders.push_back({});
    for (const std::vector<int>& order : orders)
    for (RingPhases phases : {RingPhases::kBoth, RingPhases::kReduceScatter, RingPhases::kAllGather})
    for (size_t count : {size_t{1}, size_t{7}, size_t{100}}) {
      const int shift = phases == RingPhases::kBoth ? 0 : -1;
      for (int r = 0; r < n; ++r) {
        const RingSchedule s(n, r, count, 3, shift, phases, order.empty() ? nullptr : order.data());
        const Range own = s.segment(s.send_segment(s.first_step()));
        const Range owned = s.segment(s.owned_segment());
        const size_t send_extent = phases == RingPhases::kAllGather ? own.count : count;
        const size_t recv_extent = phases == RingPhases::kReduceScatter ? owned.count : count;
        for (size_t c = 0; c < s.columns(); ++c) {
          // The first send reads this rank's own data from send.
          const Range first = s.chunk(s.send_segment(s.first_step()), c);
          EXPECT_LE(s.send_offset(first) + first.count, send_extent) << n << " ranks, rank " << r;
          EXPECT_EQ(s.send_offset(first), first.offset - own.offset * (phases == RingPhases::kAllGather ? 1 : 0));
          for (int step = s.first_step(); step < s.end_step(); ++step) {
            const Range in = s.chunk(s.recv_segment(step), c);
            if (in.count == 0) continue;
            if (s.is_reduce_step(step)) {
              EXPECT_LE(s.send_offset(in) + in.count, send_extent);  // this rank's values
            }
            // What lands in recv: every gather step, and the last reduce step.
            if (!s.is_reduce_step(step) || s.is_last_reduce_step(step)) {
              EXPECT_LE(s.recv_offset(in) + in.count, recv_extent) << n << " ranks, rank " << r << ", step " << step;
              if (phases == RingPhases::kReduceScatter) {
                EXPECT_EQ(s.recv_offset(in), in.offset - owned.offset);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rr::algo

#include "algo/tree.hpp"

namespace rr::algo {
namespace {

TEST(BinomialTree, EveryRankReachedOnceWithinLogDepth) {
  for (int n = 1; n <= 33; ++n) {
    for (int root = 0; root < n; ++root) {
      std::vector<int> parent_of(n, -2);
      std::vector<int> depth(n, 0);
      for (int r = 0; r < n; ++r) {
        BinomialTree t(n, r, root);
        parent_of[r] = t.parent();
        EXPECT_EQ(parent_of[r] == -1, r == root) << "n=" << n << " root=" << root << " rank=" << r;
        for (int c : t.children()) {
          EXPECT_EQ(BinomialTree(n, c, root).parent(), r) << "n=" << n << " root=" << root << " child " << c;
        }
      }
      // Walking up from every rank reaches the root within ceil(log2 n) hops.
      int log2n = 0;
      while ((1 << log2n) < n) ++log2n;
      for (int r = 0; r < n; ++r) {
        int hops = 0;
        for (int v = r; v != root; v = parent_of[v]) {
          ASSERT_GE(parent_of[v], 0);
          ASSERT_LE(++hops, log2n) << "n=" << n << " root=" << root << " rank=" << r;
        }
      }
      // Every non-root is the child of exactly one rank.
      std::vector<int> times(n, 0);
      for (int r = 0; r < n; ++r)
        for (int c : BinomialTree(n, r, root).children()) ++times[c];
      for (int r = 0; r < n; ++r) EXPECT_EQ(times[r], r == root ? 0 : 1) << "n=" << n << " root=" << root;
    }
  }
}

}  // namespace
}  // namespace rr::algo
