// The ring schedule's arithmetic (lib/algo/ring.hpp): one rank's whole
// allreduce schedule, every step x every chunk column, the segment it sends
// and the one it receives, as the executor asks for them. Arguments: ranks,
// elements (float32), chunk elements. items/s = chunk look-ups per second.

#include <benchmark/benchmark.h>

#include <cstddef>

#include "algo/ring.hpp"

namespace {

void BM_RingScheduleWalk(benchmark::State& state) {
  const int nranks = static_cast<int>(state.range(0));
  const auto count = static_cast<size_t>(state.range(1));
  const auto chunk_elems = static_cast<size_t>(state.range(2));
  size_t lookups = 0;
  for (auto _ : state) {
    rr::algo::RingSchedule ring(nranks, 1 % nranks, count, chunk_elems);
    size_t total = 0;
    for (int step = ring.first_step(); step < ring.end_step(); ++step) {
      for (size_t column = 0; column < ring.columns(); ++column) {
        const rr::algo::Range send = ring.chunk(ring.send_segment(step), column);
        const rr::algo::Range recv = ring.chunk(ring.recv_segment(step), column);
        total += send.offset + send.count + recv.offset + recv.count;
      }
    }
    benchmark::DoNotOptimize(total);
    lookups = 2 * static_cast<size_t>(ring.end_step() - ring.first_step()) * ring.columns();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * lookups));
  state.counters["chunks"] = static_cast<double>(lookups);
}
// 64 MiB of float32 in the default 512 KiB chunks, on 2, 8 and 64 ranks;
// then a small tensor (one chunk per segment) and an uneven count.
BENCHMARK(BM_RingScheduleWalk)
    ->Args({2, 16 << 20, 128 << 10})
    ->Args({8, 16 << 20, 128 << 10})
    ->Args({64, 16 << 20, 128 << 10})
    ->Args({8, 4096, 128 << 10})
    ->Args({7, (16 << 20) + 13, 1000});

}  // namespace
