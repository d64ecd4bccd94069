#pragma once
// rr-sim's network (sim.hpp says what it models): when a message sent at
// `ready` arrives, given what the NICs and ranks are already busy with.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim.hpp"

namespace rrsim {

class Network {
 public:
  explicit Network(const Machine& m)
      : m_(m), egress_(static_cast<size_t>(m.hosts()), 0), ingress_(static_cast<size_t>(m.hosts()), 0),
        copier_(static_cast<size_t>(m.ranks), 0) {}

  // Arrival time at `to` of `bytes` that `from` sends at time `ready`.
  double deliver(int from, int to, double ready, size_t bytes) {
    ++messages_;
    const int hf = m_.host_of(from), ht = m_.host_of(to);
    if (hf == ht) {
      double& busy = copier_[static_cast<size_t>(from)];
      const double start = ready > busy ? ready : busy;
      busy = start + static_cast<double>(bytes) / m_.local_Bps;
      return busy + m_.local_alpha_s;
    }
    bytes_between_hosts_ += bytes;
    double& out = egress_[static_cast<size_t>(hf)];
    double& in = ingress_[static_cast<size_t>(ht)];
    double start = ready;
    if (out > start) start = out;
    if (in > start) start = in;
    const double end = start + static_cast<double>(bytes) / m_.link_Bps;
    out = end;
    in = end;
    return end + m_.alpha_s;
  }

  double reduce_seconds(size_t bytes) const {
    return m_.reduce_Bps > 0 ? static_cast<double>(bytes) / m_.reduce_Bps : 0.0;
  }
  uint64_t messages() const { return messages_; }
  uint64_t bytes_between_hosts() const { return bytes_between_hosts_; }

 private:
  const Machine& m_;
  std::vector<double> egress_, ingress_;  // per host: busy until
  std::vector<double> copier_;            // per rank: its shared-memory copies busy until
  uint64_t messages_ = 0;
  uint64_t bytes_between_hosts_ = 0;
};

}  // namespace rrsim
