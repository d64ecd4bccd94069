#include "algo/memory_traffic.hpp"

#include <algorithm>

namespace rr::algo {

MemoryTraffic allreduce_traffic(Schedule schedule, int nranks) {
  MemoryTraffic t;
  const double n = nranks;
  switch (schedule) {
    case Schedule::kLocalCopy:
      // One rank: the input copied to the output (nothing in place).
      t.buffer_read = 1;
      t.buffer_written = 1;
      t.known = true;
      break;
    case Schedule::kSameHostRing:
      if (nranks < 2) break;
      // Each column: a send of the rank's own chunk (input read, slot
      // written); N - 1 reductions of the input with a slot into a slot
      // (the last also copied from that slot to the output); N - 2
      // recvCopySend (a slot copied to the output and to the next slot) and
      // a recv (a slot copied to the output). Every input byte is read
      // once, every output byte written once.
      t.buffer_read = 1;
      t.buffer_written = 1;
      t.shared_written = 2 * (n - 1) / n;
      t.shared_read = (3 * n - 3) / n;
      t.reduced = (n - 1) / n;
      t.known = true;
      break;
    case Schedule::kOneShot:
      if (nranks < 2) break;
      // The input copied into the rank's cell; then rank 0's and rank 1's
      // cells reduced into the output, and each further cell reduced into
      // the output again: N - 1 writes of the output, N - 2 reads back
      // (of a board-sized piece, in the caches).
      t.buffer_read = 1 + (n - 2);
      t.buffer_written = n - 1;
      t.shared_written = 1;
      t.shared_read = n;
      t.reduced = n - 1;
      t.known = true;
      break;
    default:
      break;
  }
  return t;
}

double traffic_bound_seconds(const MemoryTraffic& traffic, size_t bytes, const MachineRates& rates) {
  if (!traffic.known || rates.copy_bytes_per_s <= 0 || rates.reduce_bytes_per_s <= 0) return 0;
  const double b = static_cast<double>(bytes);
  // A memcpy of c bytes reads c and writes c: buffer bytes move at twice its rate.
  const double moving = (traffic.buffer_read + traffic.buffer_written) * b / (2 * rates.copy_bytes_per_s);
  const double reducing = traffic.reduced * b / rates.reduce_bytes_per_s;
  return std::max(moving, reducing);
}

size_t stream_threshold(size_t llc_bytes, int ranks, size_t cap) {
  if (llc_bytes == 0 || ranks < 1) return cap;
  return std::min(cap, llc_bytes / (2 * static_cast<size_t>(ranks)));
}

}  // namespace rr::algo
