// Bandwidth as nccl-tests defines it (nccl-tests, doc/PERFORMANCE.md):
//   algbw = size / time, where size is the row's size column in bytes;
//   busbw = algbw x the collective's factor, the fraction of `size` that
//   crosses the busiest link of an optimal algorithm, so busbw compares with
//   the hardware's link (or memory) bandwidth whatever N is.
// One factor per collective, kept here so every collective file uses, and the
// tests pin, the published values.
#pragma once

namespace rrbench {

enum class CollKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };

constexpr double bus_factor(CollKind kind, int nranks) {
  const double n = nranks;
  switch (kind) {
    // Reduce-scatter then all-gather: each rank sends and receives 2(N-1)/N of the buffer.
    case CollKind::kAllReduce: return 2.0 * (n - 1) / n;
    // size is the whole buffer; each rank receives the (N-1)/N it does not own.
    case CollKind::kReduceScatter: return (n - 1) / n;
    case CollKind::kAllGather: return (n - 1) / n;
    // Pipelined along a chain, every link carries the buffer once.
    case CollKind::kBroadcast: return 1.0;
    case CollKind::kReduce: return 1.0;
    // Each rank keeps 1/N of what it sends.
    case CollKind::kAllToAll: return (n - 1) / n;
    case CollKind::kSendRecv: return 1.0;
  }
  return 0.0;
}

// GB/s (1e9 bytes per second), as nccl-tests prints it.
constexpr double alg_bandwidth(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

constexpr double bus_bandwidth(CollKind kind, int nranks, double bytes, double seconds) {
  return alg_bandwidth(bytes, seconds) * bus_factor(kind, nranks);
}

}  // namespace rrbench
