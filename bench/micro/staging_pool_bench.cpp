// The staging pool (lib/memory/staging_pool.hpp): what a communicator pays
// once to make it, what a second reserve() of the same shape costs (nothing
// should happen), and what the data path pays per chunk to find its slot.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>

#include "memory/staging_pool.hpp"

namespace {

// A fresh pool: mmap, populate, touch every page. Arguments: slot bytes, slots.
void BM_StagingPoolReserveFresh(benchmark::State& state) {
  const auto slot_bytes = static_cast<size_t>(state.range(0));
  const auto slots = static_cast<size_t>(state.range(1));
  for (auto _ : state) {
    rr::memory::StagingPool pool;
    if (!pool.reserve(slot_bytes, slots).ok()) {
      state.SkipWithError("reserve failed");
      break;
    }
    benchmark::DoNotOptimize(pool.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * slot_bytes * slots));
}
// 512 KiB x 4 x 2 (the defaults: chunk x depth, send and receive), then larger pools.
BENCHMARK(BM_StagingPoolReserveFresh)->Args({512 << 10, 8})->Args({1 << 20, 16})->Args({4 << 20, 16})
    ->Unit(benchmark::kMicrosecond);

// reserve() on a pool already that large: every collective call makes it.
void BM_StagingPoolReserveKept(benchmark::State& state) {
  rr::memory::StagingPool pool;
  if (!pool.reserve(512 << 10, 8).ok()) {
    state.SkipWithError("reserve failed");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(pool.reserve(512 << 10, 8).ok());
  }
  state.counters["allocations"] = static_cast<double>(pool.allocations());
}
BENCHMARK(BM_StagingPoolReserveKept);

// slot(i) for every slot, writing one byte in each: the per-chunk lookup.
void BM_StagingPoolSlot(benchmark::State& state) {
  rr::memory::StagingPool pool;
  const auto slots = static_cast<size_t>(state.range(0));
  if (!pool.reserve(512 << 10, slots).ok()) {
    state.SkipWithError("reserve failed");
    return;
  }
  size_t i = 0;
  for (auto _ : state) {
    auto* p = static_cast<uint8_t*>(pool.slot(i));
    *p = static_cast<uint8_t>(i);
    benchmark::DoNotOptimize(p);
    i = i + 1 == slots ? 0 : i + 1;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StagingPoolSlot)->Arg(8)->Arg(64);

}  // namespace
