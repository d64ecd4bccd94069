#include "sim.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <queue>
#include <tuple>
#include <vector>

#include "algo/halving_doubling.hpp"
#include "algo/pipeline.hpp"
#include "algo/recursive_doubling.hpp"
#include "algo/ring.hpp"
#include "algo/ring_order.hpp"
#include "network.hpp"

namespace rrsim {

namespace {

constexpr size_t kHeaderBytes = 32;  // exec/wire.hpp's operation header

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

// Ranks that move in lock-step rounds (recursive doubling, halving-doubling):
// in each, every sender's message enters the network in the order the
// senders became ready; then each receiver is ready again once its message
// arrived, plus what it spends on it.
class Lockstep {
 public:
  Lockstep(Network& net, std::vector<double> ready)
      : net_(net), ready_(std::move(ready)), arrival_(ready_.size(), 0.0), by_time_(ready_.size()) {
    std::iota(by_time_.begin(), by_time_.end(), 0);
  }

  // Every rank r with to(r) >= 0 sends bytes(r) to it; with 0 bytes nothing
  // moves, and the receiver only waits for r to be ready.
  template <typename To, typename Bytes>
  void send(To to, Bytes bytes) {
    std::sort(by_time_.begin(), by_time_.end(), [&](int a, int b) {
      return std::tie(ready_[static_cast<size_t>(a)], a) < std::tie(ready_[static_cast<size_t>(b)], b);
    });
    for (int r : by_time_) {
      const int q = to(r);
      if (q < 0) continue;
      const size_t size = bytes(r);
      const double when = ready_[static_cast<size_t>(r)];
      arrival_[static_cast<size_t>(q)] = size == 0 ? when : net_.deliver(r, q, when, size);
    }
  }
  // Every rank r with takes(r) is ready once what was sent to it arrived,
  // plus spend(r) seconds.
  template <typename Takes, typename Spend>
  void receive(Takes takes, Spend spend) {
    for (size_t r = 0; r < ready_.size(); ++r) {
      if (takes(static_cast<int>(r))) ready_[r] = std::max(ready_[r], arrival_[r]) + spend(static_cast<int>(r));
    }
  }
  double finish() const { return *std::max_element(ready_.begin(), ready_.end()); }

 private:
  Network& net_;
  std::vector<double> ready_, arrival_;
  std::vector<int> by_time_;
};

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
  // Each rank's chunk and schedule, as the engine makes them (comm/communicator.cpp run_ring).
  const size_t chunk_elems = rr::algo::balanced_chunk_elems((count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n),
                                                            std::max<size_t>(1, e.chunk_bytes / elem), e.pipeline_depth);
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
  auto at = [&](int r) -> const rr::algo::RecursiveDoubling& { return plan[static_cast<size_t>(r)]; };
  auto active = [&](int r) { return at(r).sits_out_for() < 0; };
  auto sits_out = [&](int r) { return !active(r); };
  auto folds_in = [&](int r) { return at(r).folds_in() >= 0; };
  auto nothing = [](int) { return 0.0; };
  const int rounds = at(n - 1).rounds();  // the last rank never sits out
  Lockstep ranks(net, std::vector<double>(static_cast<size_t>(n), 0.0));
  // coll/recursive_doubling.cpp: frames of the header and a slot's worth of data.
  const size_t piece_elems = std::max<size_t>(1, (e.chunk_bytes - kHeaderBytes) / elem);
  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t data = std::min(piece_elems, count - first) * elem;
    auto frame = [&](int) { return kHeaderBytes + data; };
    auto reduce = [&](int) { return net.reduce_seconds(data); };
    // The fold: even ranks of the first pairs hand their input over.
    ranks.send([&](int r) { return at(r).sits_out_for(); }, frame);
    ranks.receive(folds_in, reduce);
    for (int round = 0; round < rounds; ++round) {
      ranks.send([&](int r) { return active(r) ? at(r).partner(round) : -1; }, frame);
      ranks.receive(active, reduce);
    }
    // And take the result back.
    ranks.send([&](int r) { return at(r).folds_in(); }, frame);
    ranks.receive(sits_out, nothing);
  }
  result.seconds = ranks.finish();
  result.messages = net.messages();
  result.bytes_between_hosts = net.bytes_between_hosts();
  return result;
}

Result simulate_one_shot(const Machine& m, const Engine& e, size_t bytes, size_t elem) {
  Result result;
  const int n = m.ranks;
  const size_t count = bytes / elem;
  if (n <= 1 || count == 0) return result;
  Network net(m);
  std::vector<double> ready(static_cast<size_t>(n), 0.0), seen(static_cast<size_t>(n), 0.0);
  const size_t piece_elems = std::max<size_t>(1, e.board_bytes / elem);
  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t data = std::min(piece_elems, count - first) * elem;
    // The copy into the rank's own cell: a same-host "message" to itself.
    for (int r = 0; r < n; ++r) seen[static_cast<size_t>(r)] = net.deliver(r, r, ready[static_cast<size_t>(r)], data);
    for (int r = 0; r < n; ++r) {
      double t = ready[static_cast<size_t>(r)];
      for (int p = 0; p < n; ++p) {
        t = std::max(t, seen[static_cast<size_t>(p)]);
        if (p > 0) t += net.reduce_seconds(data);
      }
      ready[static_cast<size_t>(r)] = t;
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
  auto at = [&](int r) -> const rr::algo::HalvingDoubling& { return plan[static_cast<size_t>(r)]; };
  auto active = [&](int r) { return at(r).sits_out_for() < 0; };
  auto nothing = [](int) { return 0.0; };
  const size_t p = static_cast<size_t>(at(0).blocks());
  auto elements = [&](rr::algo::HalvingDoubling::Blocks b) {
    const rr::algo::Range from = rr::algo::split(count, p, static_cast<size_t>(b.first));
    const rr::algo::Range to = rr::algo::split(count, p, static_cast<size_t>(b.last - 1));
    return to.offset + to.count - from.offset;
  };
  const size_t piece_elems = std::max<size_t>(1, e.chunk_bytes / elem);
  Lockstep ranks(net, argument_check(m, e, net));
  // One round between partners: what each sends, and whether each adds up
  // what it gets, piece by piece (the runner reduces each before the next
  // moves), or takes it in one message.
  auto exchange = [&](auto partner_of, auto elements_sent, bool reduce) {
    size_t pieces = 1;
    for (int r = 0; r < n; ++r) {
      if (active(r) && reduce) pieces = std::max(pieces, (elements_sent(r) + piece_elems - 1) / piece_elems);
    }
    for (size_t piece = 0; piece < pieces; ++piece) {
      auto piece_of = [&](size_t total) {
        const size_t first = piece * piece_elems;
        return !reduce ? total : first < total ? std::min(piece_elems, total - first) : 0;
      };
      ranks.send([&](int r) { return active(r) ? partner_of(r) : -1; },
                 [&](int r) { return piece_of(elements_sent(r)) * elem; });
      ranks.receive(active, [&](int r) {
        return reduce ? net.reduce_seconds(piece_of(elements_sent(partner_of(r))) * elem) : 0.0;
      });
    }
  };
  // The fold: the even ranks of the first pairs hand their input over in pieces.
  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t piece = std::min(piece_elems, count - first) * elem;
    ranks.send([&](int r) { return at(r).sits_out_for(); }, [&](int) { return piece; });
    ranks.receive([&](int r) { return at(r).folds_in() >= 0; }, [&](int) { return net.reduce_seconds(piece); });
  }
  const int rounds = at(n - 1).rounds();
  for (int k = 0; k < rounds; ++k) {
    exchange([&](int r) { return at(r).scatter_partner(k); }, [&](int r) { return elements(at(r).scatter_send(k)); },
             true);
  }
  for (int k = 0; k < rounds; ++k) {
    exchange([&](int r) { return at(r).gather_partner(k); }, [&](int r) { return elements(at(r).gather_send(k)); },
             false);
  }
  // The hand-back, one message.
  ranks.send([&](int r) { return at(r).folds_in(); }, [&](int) { return count * elem; });
  ranks.receive([&](int r) { return !active(r); }, nothing);
  result.seconds = ranks.finish();
  result.messages = net.messages();
  result.bytes_between_hosts = net.bytes_between_hosts();
  return result;
}

}  // namespace rrsim
