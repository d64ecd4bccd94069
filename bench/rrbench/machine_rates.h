// The physical references for shared-memory runs. One core's memcpy
// between buffers far larger than any cache (bus/cpy): a ring rank on
// shared memory moves its bytes with copies like this, so busbw / memcpy
// says how much of the machine a backend uses. And the rates every rank
// gets when all copy, or all reduce, at once, which price the memory
// traffic an allreduce cannot avoid (bus/bound; lib/algo/memory_traffic.hpp,
// docs/algorithms.md "Memory traffic on one host").
#pragma once

#include <cstddef>
#include <functional>

#include "algo/memory_traffic.hpp"

namespace rrbench {

// Bytes copied per second / 1e9, best of 5 copies of 256 MiB, on this
// thread alone.
double measure_memcpy_gbps();

// This rank's rates while every rank measures its own at once: `barrier`
// (every rank calls this together) lines the ranks up before each round.
// Copy: best of 3 memcpys of 256 MiB; reduce: best of 3 rounds of float32
// sums of 64 KiB chunks (in the caches) into 256 MiB of results.
rr::algo::MachineRates measure_rates_at_once(const std::function<void()>& barrier);

// The most busbw (GB/s) an allreduce of `bytes` on `nranks` ranks of one
// host can reach at `rates` (the slowest rank's): every rank reads its
// input and writes its output once and reduces (N-1)/N of it, as the
// slot-ring ring does (the least any allreduce does). 0 on one rank.
double allreduce_bound_busbw(std::size_t bytes, int nranks, const rr::algo::MachineRates& rates);

}  // namespace rrbench
