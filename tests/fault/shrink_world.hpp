#pragma once
// What the shrink tests share (shrink_test.cpp, shrink_failed_test.cpp): a
// loop step of every collective, and the check of the communicator a
// shrink made.

#include <ringreduce/ringreduce.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "world.hpp"

namespace fault_world {

// Collective `i` of the loop on `comm` (rank `rank` of `n`): each kind in turn.
inline rrResult_t one_collective(rrComm_t comm, int i, int rank, int n) {
  std::vector<int32_t> a(size_t{1000} * static_cast<size_t>(n), rank + 1), b(a.size());
  switch (i % 6) {
    case 0: return rrAllReduce(a.data(), b.data(), 1000, rrInt32, rrSum, comm, nullptr);
    case 1: return rrBroadcast(a.data(), b.data(), 1000, rrInt32, i % n, comm, nullptr);
    case 2: return rrAllGather(a.data(), b.data(), 1000, rrInt32, comm, nullptr);
    case 3: return rrReduceScatter(a.data(), b.data(), 1000, rrInt32, rrSum, comm, nullptr);
    case 4: return rrAllToAll(a.data(), b.data(), 1000, rrInt32, comm, nullptr);
    default: return rrBarrier(comm, nullptr);
  }
}

// 100 collectives on the shrunk communicator, checked: each survivor (old
// rank r) contributes (r + 1) * (k % 13 + i); `old_ranks` are the survivors.
inline bool check_after(rrComm_t next, int rank, const std::vector<int>& old_ranks, Outcome* out) {
  int new_rank = -1, new_size = -1;
  (void)rrCommUserRank(next, &new_rank);
  (void)rrCommCount(next, &new_size);
  const int expected_rank = static_cast<int>(std::find(old_ranks.begin(), old_ranks.end(), rank) - old_ranks.begin());
  if (new_rank != expected_rank || new_size != static_cast<int>(old_ranks.size())) {
    std::snprintf(out->error, sizeof(out->error), "rank %d of %d, expected %d of %zu", new_rank, new_size,
                  expected_rank, old_ranks.size());
    return false;
  }
  int32_t weight = 0;
  for (int r : old_ranks) weight += r + 1;
  for (int i = 0; i < 100; ++i) {
    const size_t count = i % 3 == 0 ? 70000 : i % 3 == 1 ? 7 : 1000;  // slot rings, board, either
    std::vector<int32_t> v(count), root(count);
    for (size_t k = 0; k < count; ++k) v[k] = (rank + 1) * static_cast<int32_t>(k % 13 + i);
    rrResult_t r = rrAllReduce(v.data(), v.data(), count, rrInt32, rrSum, next, nullptr);
    for (size_t k = 0; k < count && r == rrSuccess; ++k) {
      if (v[k] != weight * static_cast<int32_t>(k % 13 + i)) r = rrInternalError;
    }
    const int from = i % new_size;  // its old rank: old_ranks[from]
    for (size_t k = 0; k < count; ++k) root[k] = (rank + 1) * static_cast<int32_t>(k % 13 + i);
    if (r == rrSuccess) r = rrBroadcast(root.data(), root.data(), count, rrInt32, from, next, nullptr);
    for (size_t k = 0; k < count && r == rrSuccess; ++k) {
      if (root[k] != (old_ranks[static_cast<size_t>(from)] + 1) * static_cast<int32_t>(k % 13 + i)) r = rrInternalError;
    }
    if (r != rrSuccess) {
      note(out, ("collective " + std::to_string(i) + " after the shrink").c_str(), r, next);
      return false;
    }
  }
  return true;
}

// Every rank in turn of `from` to `to` ranks, killed at a step drawn from
// `seed` (some step of every kind of one_collective): f(n, victim, step),
// inside a SCOPED_TRACE that says which.
template <typename F>
void every_rank_in_turn(int from, int to, unsigned seed, F f) {
  for (int n = from; n <= to; ++n) {
    for (int victim = 0; victim < n; ++victim) {
      seed = seed * 1103515245u + 12345u;
      const int kill_at = 2 + static_cast<int>((seed >> 16) % 23);
      SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(victim) + " killed at step " +
                   std::to_string(kill_at));
      f(n, victim, kill_at);
    }
  }
}

}  // namespace fault_world
