#include "sim.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <queue>
#include <tuple>
#include <vector>

#include "algo/halving_doubling.hpp"
#include "algo/recursive_doubling.hpp"
#include "algo/ring.hpp"
#include "algo/ring_order.hpp"
#include "network.hpp"

namespace rrsim {

namespace {

constexpr size_t kHeaderBytes = 32;  // comm/wire.hpp's operation header

// A ring send that becomes ready at `time`: rank `rank` sends its step
// `step` chunk of column `column`.
struct Send {
  double time;
  int rank;
  int step;
  uint32_t column;
  bool operator>(const Send& o) const {
    return std::tie(time, rank, step, column) > std::tie(o.time, o.rank, o.step, o.column);
  }
};

// When each rank may start after the argument check: a header to each
// neighbour by rank number, both awaited (comm/communicator.cpp agree()).
std::vector<double> argument_check(const Machine& m, const Engine& e, Network& net) {
  const int n = m.ranks;
  std::vector<double> heard(static_cast<size_t>(n), 0.0);
  if (!e.check_arguments) return heard;
  for (int r = 0; r < n; ++r) {
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    heard[static_cast<size_t>(right)] = std::max(heard[static_cast<size_t>(right)], net.deliver(r, right, 0.0, kHeaderBytes));
    if (left != right) {
      heard[static_cast<size_t>(left)] = std::max(heard[static_cast<size_t>(left)], net.deliver(r, left, 0.0, kHeaderBytes));
    }
  }
  return heard;
}

}  // namespace

std::vector<int> ring_order(const Machine& m, const Engine& e) {
  std::vector<int> host(static_cast<size_t>(m.ranks));
  for (int r = 0; r < m.ranks; ++r) host[static_cast<size_t>(r)] = m.host_of(r);
  if (e.topology_order) return rr::algo::topology_ring_order(host);
  std::vector<int> order(static_cast<size_t>(m.ranks));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

Result simulate_ring(const Machine& m, const Engine& e, size_t bytes, size_t elem) {
  Result result;
  const int n = m.ranks;
  const size_t count = bytes / elem;
  if (n <= 1 || count == 0) return result;
  const std::vector<int> order = ring_order(m, e);
  const size_t chunk_elems = std::max<size_t>(1, e.chunk_bytes / elem);
  // Each rank's schedule, as the engine makes it (comm/communicator.cpp run_ring).
  std::vector<rr::algo::RingSchedule> schedule;
  schedule.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    schedule.emplace_back(n, r, count, chunk_elems, 0, rr::algo::RingPhases::kBoth, order.data());
  }
  const size_t columns = schedule[0].columns();
  Network net(m);

  const std::vector<double> start = argument_check(m, e, net);

  const int steps = 2 * (n - 1);
  const size_t depth = std::min(columns, static_cast<size_t>(std::max(1, e.pipeline_depth)));
  std::vector<size_t> next_column(static_cast<size_t>(n), depth);
  std::vector<double> done = start;
  std::priority_queue<Send, std::vector<Send>, std::greater<Send>> ready;
  for (int r = 0; r < n; ++r) {
    for (size_t c = 0; c < depth; ++c) ready.push(Send{start[static_cast<size_t>(r)], r, 0, static_cast<uint32_t>(c)});
  }
  while (!ready.empty()) {
    const Send s = ready.top();
    ready.pop();
    const rr::algo::RingSchedule& sched = schedule[static_cast<size_t>(s.rank)];
    const rr::algo::Range chunk = sched.chunk(sched.send_segment(s.step), s.column);
    const size_t size = chunk.count * elem;
    const int right = sched.right();
    // Empty chunks (fewer elements than ranks) are not sent.
    const double arrived = size == 0 ? s.time : net.deliver(s.rank, right, s.time, size);
    const double next = arrived + (sched.is_reduce_step(s.step) ? net.reduce_seconds(size) : 0.0);
    if (s.step + 1 < steps) {
      ready.push(Send{next, right, s.step + 1, s.column});
      continue;
    }
    // The right neighbour finished this column: the window lets its next one in.
    double& finished = done[static_cast<size_t>(right)];
    finished = std::max(finished, next);
    size_t& column = next_column[static_cast<size_t>(right)];
    if (column < columns) ready.push(Send{next, right, 0, static_cast<uint32_t>(column++)});
  }
  result.seconds = *std::max_element(done.begin(), done.end());
  result.messages = net.messages();
  result.bytes_between_hosts = net.bytes_between_hosts();
  return result;
}

Result simulate_recursive_doubling(const Machine& m, const Engine& e, size_t bytes, size_t elem) {
  Result result;
  const int n = m.ranks;
  const size_t count = bytes / elem;
  if (n <= 1 || count == 0) return result;
  Network net(m);
  std::vector<rr::algo::RecursiveDoubling> plan;
  plan.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) plan.emplace_back(n, r);
  const int rounds = plan[static_cast<size_t>(n - 1)].rounds();  // the last rank never sits out
  std::vector<double> ready(static_cast<size_t>(n), 0.0);
  std::vector<double> arrival(static_cast<size_t>(n), 0.0);
  std::vector<int> by_time(static_cast<size_t>(n));
  std::iota(by_time.begin(), by_time.end(), 0);
  // Sends reach the network in the order they become ready.
  auto in_time_order = [&] {
    std::sort(by_time.begin(), by_time.end(), [&](int a, int b) {
      return std::tie(ready[static_cast<size_t>(a)], a) < std::tie(ready[static_cast<size_t>(b)], b);
    });
  };
  // comm/recursive_doubling.cpp: frames of the header and a slot's worth of data.
  const size_t piece_elems = std::max<size_t>(1, (e.chunk_bytes - kHeaderBytes) / elem);
  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t data = std::min(piece_elems, count - first) * elem;
    const size_t frame = kHeaderBytes + data;
    in_time_order();
    for (int r : by_time) {  // the fold: even ranks of the first pairs hand their input over
      const int partner = plan[static_cast<size_t>(r)].sits_out_for();
      if (partner >= 0) arrival[static_cast<size_t>(partner)] = net.deliver(r, partner, ready[static_cast<size_t>(r)], frame);
    }
    for (int r = 0; r < n; ++r) {
      if (plan[static_cast<size_t>(r)].folds_in() >= 0) {
        ready[static_cast<size_t>(r)] = std::max(ready[static_cast<size_t>(r)], arrival[static_cast<size_t>(r)]) +
                                        net.reduce_seconds(data);
      }
    }
    for (int round = 0; round < rounds; ++round) {
      in_time_order();
      for (int r : by_time) {
        if (plan[static_cast<size_t>(r)].sits_out_for() >= 0) continue;
        const int partner = plan[static_cast<size_t>(r)].partner(round);
        arrival[static_cast<size_t>(partner)] = net.deliver(r, partner, ready[static_cast<size_t>(r)], frame);
      }
      for (int r = 0; r < n; ++r) {
        if (plan[static_cast<size_t>(r)].sits_out_for() >= 0) continue;
        ready[static_cast<size_t>(r)] = std::max(ready[static_cast<size_t>(r)], arrival[static_cast<size_t>(r)]) +
                                        net.reduce_seconds(data);
      }
    }
    in_time_order();
    for (int r : by_time) {  // and take the result back
      const int partner = plan[static_cast<size_t>(r)].folds_in();
      if (partner >= 0) arrival[static_cast<size_t>(partner)] = net.deliver(r, partner, ready[static_cast<size_t>(r)], frame);
    }
    for (int r = 0; r < n; ++r) {
      if (plan[static_cast<size_t>(r)].sits_out_for() >= 0) ready[static_cast<size_t>(r)] = arrival[static_cast<size_t>(r)];
    }
  }
  result.seconds = *std::max_element(ready.begin(), ready.end());
  result.messages = net.messages();
  result.bytes_between_hosts = net.bytes_between_hosts();
  return result;
}

Result simulate_halving_doubling(const Machine& m, const Engine& e, size_t bytes, size_t elem) {
  Result result;
  const int n = m.ranks;
  const size_t count = bytes / elem;
  if (n <= 1 || count == 0) return result;
  Network net(m);
  std::vector<rr::algo::HalvingDoubling> plan;
  plan.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) plan.emplace_back(n, r);
  const size_t p = static_cast<size_t>(plan[0].blocks());
  auto elements = [&](rr::algo::HalvingDoubling::Blocks b) {
    const rr::algo::Range from = rr::algo::split(count, p, static_cast<size_t>(b.first));
    const rr::algo::Range to = rr::algo::split(count, p, static_cast<size_t>(b.last - 1));
    return to.offset + to.count - from.offset;
  };
  const size_t piece_elems = std::max<size_t>(1, e.chunk_bytes / elem);
  std::vector<double> ready = argument_check(m, e, net);
  std::vector<double> arrival(static_cast<size_t>(n), 0.0);
  std::vector<int> by_time(static_cast<size_t>(n));
  std::iota(by_time.begin(), by_time.end(), 0);
  auto in_time_order = [&] {
    std::sort(by_time.begin(), by_time.end(), [&](int a, int b) {
      return std::tie(ready[static_cast<size_t>(a)], a) < std::tie(ready[static_cast<size_t>(b)], b);
    });
  };
  auto active = [&](int r) { return plan[static_cast<size_t>(r)].sits_out_for() < 0; };
  // One exchange between partners: what each sends, what each adds up.
  auto exchange = [&](auto partner_of, auto elements_sent, bool reduce) {
    // Pieces one after another (the runner reduces each before the next moves).
    size_t pieces = 1;
    for (int r = 0; r < n; ++r) {
      if (active(r)) pieces = std::max(pieces, reduce ? (elements_sent(r) + piece_elems - 1) / piece_elems : size_t{1});
    }
    for (size_t piece = 0; piece < pieces; ++piece) {
      in_time_order();
      for (int r : by_time) {
        if (!active(r)) continue;
        const size_t sent = elements_sent(r);
        const size_t first = piece * piece_elems;
        const size_t this_piece = !reduce ? sent : first < sent ? std::min(piece_elems, sent - first) : 0;
        const int q = partner_of(r);
        arrival[static_cast<size_t>(q)] =
            this_piece == 0 ? ready[static_cast<size_t>(r)] : net.deliver(r, q, ready[static_cast<size_t>(r)], this_piece * elem);
      }
      for (int r = 0; r < n; ++r) {
        if (!active(r)) continue;
        const size_t got = elements_sent(partner_of(r));
        const size_t first = piece * piece_elems;
        const size_t this_piece = !reduce ? got : first < got ? std::min(piece_elems, got - first) : 0;
        ready[static_cast<size_t>(r)] = std::max(ready[static_cast<size_t>(r)], arrival[static_cast<size_t>(r)]) +
                                        (reduce ? net.reduce_seconds(this_piece * elem) : 0.0);
      }
    }
  };
  // The fold: the even ranks of the first pairs hand their input over in pieces.
  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t n_piece = std::min(piece_elems, count - first);
    in_time_order();
    for (int r : by_time) {
      const int partner = plan[static_cast<size_t>(r)].sits_out_for();
      if (partner >= 0) arrival[static_cast<size_t>(partner)] = net.deliver(r, partner, ready[static_cast<size_t>(r)], n_piece * elem);
    }
    for (int r = 0; r < n; ++r) {
      if (plan[static_cast<size_t>(r)].folds_in() >= 0) {
        ready[static_cast<size_t>(r)] = std::max(ready[static_cast<size_t>(r)], arrival[static_cast<size_t>(r)]) +
                                        net.reduce_seconds(n_piece * elem);
      }
    }
  }
  const int rounds = plan[static_cast<size_t>(n - 1)].rounds();
  for (int k = 0; k < rounds; ++k) {
    exchange([&](int r) { return plan[static_cast<size_t>(r)].scatter_partner(k); },
             [&](int r) { return elements(plan[static_cast<size_t>(r)].scatter_send(k)); }, true);
  }
  for (int k = 0; k < rounds; ++k) {
    exchange([&](int r) { return plan[static_cast<size_t>(r)].gather_partner(k); },
             [&](int r) { return elements(plan[static_cast<size_t>(r)].gather_send(k)); }, false);
  }
  in_time_order();
  for (int r : by_time) {  // the hand-back, one message
    const int partner = plan[static_cast<size_t>(r)].folds_in();
    if (partner >= 0) arrival[static_cast<size_t>(partner)] = net.deliver(r, partner, ready[static_cast<size_t>(r)], count * elem);
  }
  for (int r = 0; r < n; ++r) {
    if (!active(r)) ready[static_cast<size_t>(r)] = arrival[static_cast<size_t>(r)];
  }
  result.seconds = *std::max_element(ready.begin(), ready.end());
  result.messages = net.messages();
  result.bytes_between_hosts = net.bytes_between_hosts();
  return result;
}

}  // namespace rrsim
