#pragma once
// How many chunk columns the ring keeps in flight to fill a long link.
//
// A column sends one chunk per step and cannot send the next until the chunk
// from its left neighbour has landed: each hop costs the chunk's time on the
// wire (chunk / rate) plus the link's one-way latency. A link is busy only if
// the other columns have that latency's worth of bytes to send meanwhile:
//
//     (depth - 1) x chunk >= rate x one_way
//
// so a link whose bandwidth-delay product is larger than the default
// pipeline's idles for part of every hop (measured on a shaped 1 Gbit/s
// link with 10 ms each way: depth 1, 2, 4 give 0.32, 0.61, 0.905 of the link,
// linear until the link is full; bench/RESULTS.md, "Delayed links"). The
// margin covers what the formula leaves out: the reduction, a rendezvous
// hand-shake, jitter.

#include <cstddef>

namespace rr::algo {

struct PipelineChoice {
  int depth = 0;
  bool capped = false;  // the link wanted more than `cap` columns
};

// The depth for a link of `rate_Bps` bytes/s and `rtt_s` seconds round trip,
// with chunks of `chunk_bytes`: 1 + ceil(kMargin x rate x rtt/2 / chunk),
// within [floor, cap].
PipelineChoice depth_for_link(double rtt_s, double rate_Bps, size_t chunk_bytes, int floor, int cap);

inline constexpr double kPipelineMargin = 1.5;

// The chunk, in elements, for a ring call whose largest segment holds
// `segment_elems`, at most `chunk_elems` a message, `depth` columns in
// flight. The columns go in waves of `depth` (a column's staging slots are
// free only once it has gone around the ring, and the ranks move in step), so
// a last wave of a few columns pays a whole wave's latency for a fraction of
// its bytes: on a link with 10 ms each way, 32 columns at depth 5 (six full
// waves and one of 2) took 3 % longer than at depth 4 (rr-sim). So the chunk
// is cut to make every wave full: the same number of waves, depth x waves
// columns, none larger than `chunk_elems`. A call of one wave or less keeps
// its chunk.
size_t balanced_chunk_elems(size_t segment_elems, size_t chunk_elems, int depth);

}  // namespace rr::algo
