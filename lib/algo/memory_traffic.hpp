#pragma once
// What an allreduce on one host costs in memory traffic: for each same-host
// schedule, the bytes each rank reads and writes of the call's buffers, of
// the shared memory between ranks, and reduces, per byte of the buffer; and
// the shortest time that traffic can take on a machine whose copy and
// reduce rates were measured (docs/algorithms.md, "Memory traffic on one
// host"). On one host the wire is memory: this, not the alpha-beta model
// of select.hpp, is what says how close to the machine a run came.
//
// The call's buffers are the traffic that leaves the caches once they are
// larger than them; the slots and board cells are reused chunk after chunk
// and stay in the caches, so they are counted but not priced. In place the
// input is the output: its reads are reads of the output.

#include <cstddef>

#include "algo/schedule.hpp"

namespace rr::algo {

struct MemoryTraffic {
  double buffer_read = 0;     // the input (or, in place, the output) read
  double buffer_written = 0;  // the output written
  double shared_read = 0;     // slots or board cells read
  double shared_written = 0;  // slots or board cells written
  double reduced = 0;         // results of two-operand reductions written
  bool known = false;         // false: no model for this schedule
};

// Per rank and byte of an allreduce of `nranks` ranks (segments taken as
// even), for the schedules that run on one host's shared memory:
// kSameHostRing, kOneShot, and kLocalCopy (one rank). Others: known false.
MemoryTraffic allreduce_traffic(Schedule schedule, int nranks);

// The machine's rates, each measured with every rank at it at once (so
// that ranks sharing memory, or cores, share the rate): bytes copied per
// second by one rank's memcpy of a buffer larger than its caches, and
// bytes of results per second of one rank's two-operand reduction of
// chunks that stay in its caches.
struct MachineRates {
  double copy_bytes_per_s = 0;
  double reduce_bytes_per_s = 0;
};

// The least time `traffic` takes for a buffer of `bytes`: the buffer bytes
// at memcpy's pace (a copy reads one byte and writes one per byte copied),
// or the reductions at the reduce rate, whichever is longer. 0 when the
// traffic or the rates are unknown.
double traffic_bound_seconds(const MemoryTraffic& traffic, size_t bytes, const MachineRates& rates);

// From how many bytes a same-host ring writes its output with non-temporal
// stores when RR_SHM_STREAM_BYTES is unset: once the host's `ranks` inputs
// and outputs together (2 x ranks x the buffer) outgrow the last-level
// cache of `llc_bytes`, the output is not in the caches when the call
// ends anyway, and writing it past them saves reading each line first;
// at most `cap` (the setting's default, measured where the cache the
// machine reports is implausibly large). `llc_bytes` 0 (unknown): `cap`.
size_t stream_threshold(size_t llc_bytes, int ranks, size_t cap);

}  // namespace rr::algo
