#include "shrink.hpp"

#include <algorithm>
#include <vector>

namespace rrsim {

namespace {

// One all-to-all of `bytes` among the ranks of `per_host` (survivors on each
// host): every rank sends to every other, rank + 1 first, as the engine
// does, so that at each moment the messages form a permutation and every
// NIC carries its share at full rate. It takes the longest of a rank's
// posting and taking (2 (S - 1) overheads) and its host's NIC moving what
// leaves or enters it, plus one latency; adds its messages to *messages.
double all_to_all(const Machine& m, const std::vector<int>& per_host, size_t bytes, double overhead_s,
                  uint64_t* messages) {
  int survivors = 0;
  for (int k : per_host) survivors += k;
  const double cpu = 2.0 * (survivors - 1) * overhead_s;
  double slowest = cpu;
  bool remote = false;
  for (int k : per_host) {
    if (k == 0) continue;
    const double out = static_cast<double>(k) * (survivors - k) * static_cast<double>(bytes);
    const double local = static_cast<double>(k - 1) * static_cast<double>(bytes);  // one rank's copies
    slowest = std::max({slowest, out / m.link_Bps, cpu + local / m.local_Bps});
    remote = remote || k < survivors;
  }
  *messages += static_cast<uint64_t>(survivors) * static_cast<uint64_t>(survivors - 1);
  return slowest + (remote ? m.alpha_s : m.local_alpha_s);
}

}  // namespace

ShrinkResult simulate_shrink_failed(const Machine& m, const ShrinkModel& s) {
  ShrinkResult result;
  // The lost ranks spread over the hosts (every k-th rank), as failures are.
  const int lost = std::min(std::max(s.lost + s.die_during, 0), m.ranks - 1);
  const int stride = lost > 0 ? m.ranks / lost : m.ranks + 1;
  std::vector<int> per_host(static_cast<size_t>(m.hosts()), 0);
  for (int r = 0, dropped = 0; r < m.ranks; ++r) {
    if (dropped < lost && r % stride == stride - 1) {
      ++dropped;
      continue;
    }
    ++per_host[static_cast<size_t>(m.host_of(r))];
    ++result.survivors;
  }
  // One round when the survivors saw the same losses; each death during it
  // two more, the first of which waits for the transport to report it; and
  // after the shrink the confirming agreement's one round (nobody else died).
  result.rounds = 1 + 2 * s.die_during + 1;
  const size_t set_bytes = 12 + (static_cast<size_t>(m.ranks) + 7) / 8;
  for (int round = 0; round < result.rounds; ++round) {
    result.agreement_s += all_to_all(m, per_host, set_bytes, s.overhead_s, &result.agreement_messages);
  }
  result.agreement_s += s.die_during * s.detect_s;
  result.agreement_bytes = result.agreement_messages * set_bytes;
  // The shrink: the offers (the list and an address), the connection and
  // set-up, the one-byte words.
  const size_t offer_bytes = 4 * (3 + static_cast<size_t>(lost)) + s.address_bytes;
  result.shrink_s = all_to_all(m, per_host, offer_bytes, s.overhead_s, &result.shrink_messages) + s.connect_s +
                    all_to_all(m, per_host, 1, s.overhead_s, &result.shrink_messages);
  result.total_s = result.agreement_s + result.shrink_s;
  return result;
}

}  // namespace rrsim
