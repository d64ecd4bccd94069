// Sizing the ring's pipeline to the longest link between ring neighbours
// (algo/pipeline.hpp). Each rank whose right neighbour runs on another host
// times one-byte round trips to it; every rank works out the depth its link
// wants at its rate; rank 0 takes the largest and answers every rank with
// it, so that all keep the same number of staging slots (the broadcast tree
// and the chain choose between them by it, and every rank must choose alike).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "algo/pipeline.hpp"
#include "algo/ring.hpp"
#include "comm/communicator.hpp"
#include "common/log.hpp"
#include "exec/tags.hpp"
#include "topo/link_speed.hpp"

namespace rr {

namespace {

// The first round also pays for a lazy UCX connect to a neighbour that the
// topology order made; the least of the others counts.
constexpr int kRounds = 4;

using exec::setup_tag;  // 4: ping, 5: pong, 6: each rank's wish to rank 0, 7: its answer

// What a rank tells rank 0: the depth its link wants, and why; and, where
// its link is TCP, what the kernel lets TCP keep in flight, if that is less
// than the link's bandwidth-delay product.
struct Wish {
  int32_t depth = 0;
  int32_t capped = 0;
  float rtt_ms = 0;
  float gbps = 0;
  double tcp_limit_bytes = 0;  // 0: not short
  int32_t rank = -1;           // whose wish it is
  int32_t reserved = 0;
};

// The third number of a net.ipv4.tcp_rmem/tcp_wmem file (autotuning's
// ceiling, for this network namespace); 0 if unreadable.
double tcp_buffer_ceiling(const char* path) {
  std::FILE* file = std::fopen(path, "re");
  if (!file) return 0;
  double low = 0, initial = 0, high = 0;
  const int read = std::fscanf(file, "%lf %lf %lf", &low, &initial, &high);
  std::fclose(file);
  return read == 3 ? high : 0;
}

// What TCP can keep in flight on one connection: the receive window is about
// half of its buffer (the rest is the kernel's overhead), the sender's
// unacknowledged bytes sit in its send buffer.
double tcp_in_flight_ceiling() {
  const double receive = tcp_buffer_ceiling("/proc/sys/net/ipv4/tcp_rmem") / 2;
  const double send = tcp_buffer_ceiling("/proc/sys/net/ipv4/tcp_wmem");
  if (receive > 0 && send > 0) return std::min(receive, send);
  return std::max(receive, send);
}

// A wish's link: its rate in bytes/s, and its bandwidth-delay product.
double bytes_per_second(const Wish& w) { return static_cast<double>(w.gbps) * 1e9 / 8; }
double bandwidth_delay_bytes(const Wish& w) { return static_cast<double>(w.rtt_ms) * 1e-3 * bytes_per_second(w); }

static_assert(sizeof(Wish) == 32, "a Wish travels as bytes: no padding, the same on every rank");

}  // namespace

Status Communicator::size_pipeline() {
  if (size_ < 2) return Status::Ok();
  // A communicator made by split() starts from its parent's settings, sized
  // for the parent's links.
  if (settings_.pipeline_depth_auto) {
    settings_.pipeline_depth = Settings::kDefaultPipelineDepth;
    if (settings_.pipeline_depth_source.kind == Source::Kind::kMeasured) settings_.pipeline_depth_source = Source();
  }
  const std::vector<int> hosts = transport_->host_of_ranks();
  const bool across_hosts = hosts.size() == static_cast<size_t>(size_) && host_shape_.hosts >= 2;

  // Every rank takes part, whether its own depth is fixed or not: its
  // neighbours cannot know, and every rank must end with the same depth
  // (the tree/chain choice counts the staging slots it gives).
  double rtt_s = 0;
  bool ping = false;
  int right = -1;
  const std::string name = "communicator setup (the pipeline depth: round trips to the ring's neighbours on "
                           "other hosts, and rank 0's answer)";
  if (across_hosts) {
    const std::vector<int> order = ring_order();
    const algo::RingSchedule ring(size_, rank_, 1, 1, 0, algo::RingPhases::kBoth, order.data());
    const int left = ring.left();
    right = ring.right();
    ping = hosts[static_cast<size_t>(right)] != hosts[static_cast<size_t>(rank_)];
    const bool echo = hosts[static_cast<size_t>(left)] != hosts[static_cast<size_t>(rank_)];
    uint8_t ping_out = 0, ping_in = 0, pong_out = 0, pong_in = 0;
    for (int round = 0; round < kRounds && (ping || echo); ++round) {
      const exec::Clock::time_point start = exec::Clock::now();
      if (ping) batch_->add_send(right, setup_tag(4), &ping_out, 1);
      if (echo) batch_->add_recv(left, setup_tag(4), &ping_in, 1);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      if (echo) batch_->add_send(left, setup_tag(5), &pong_out, 1);
      if (ping) batch_->add_recv(right, setup_tag(5), &pong_in, 1);
      RR_RETURN_IF_ERROR(run_batch(*batch_, name));
      const double took = std::chrono::duration<double>(exec::Clock::now() - start).count();
      if (ping && round > 0) rtt_s = round == 1 ? took : std::min(rtt_s, took);
    }
  }

  // This rank's link rate: the setting, else what its interface reports.
  double gbps = settings_.link_gbps;
  std::string rate_from = settings_.link_gbps_source.text();
  if (!(gbps > 0)) {
    const topo::LinkSpeed link = topo::fastest_link(topo::ucx_net_devices());
    gbps = link.gbps > 0 ? link.gbps : Settings::kDefaultLinkGbps;
    rate_from = link.gbps > 0 ? "the speed " + link.device + " reports" : "no interface reports a speed";
  }
  Wish mine;
  mine.rank = rank_;
  mine.depth = settings_.pipeline_depth;
  mine.rtt_ms = static_cast<float>(rtt_s * 1e3);
  mine.gbps = static_cast<float>(gbps);
  if (settings_.pipeline_depth_auto && ping) {
    const algo::PipelineChoice choice = algo::depth_for_link(rtt_s, bytes_per_second(mine), settings_.chunk_bytes,
                                                             Settings::kDefaultPipelineDepth,
                                                             Settings::kMaxPipelineDepth);
    mine.depth = choice.depth;
    mine.capped = choice.capped ? 1 : 0;
  }
  if (ping && transport_->path(right).tcp) {
    const double ceiling = tcp_in_flight_ceiling();
    if (ceiling > 0 && ceiling < bandwidth_delay_bytes(mine)) mine.tcp_limit_bytes = ceiling;
  }

  // The largest wish wins: a fixed depth counts as its rank's wish.
  Wish chosen = mine;
  if (rank_ == 0) {
    std::vector<Wish> wishes(static_cast<size_t>(size_), mine);
    for (int r = 1; r < size_; ++r) batch_->add_recv(r, setup_tag(6), &wishes[static_cast<size_t>(r)], sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
    int short_rank = -1;
    for (int r = 0; r < size_; ++r) {
      const Wish& w = wishes[static_cast<size_t>(r)];
      // Among equal depths, the longest round trip: the one the depth is for.
      if (w.depth > chosen.depth || (w.depth == chosen.depth && w.rtt_ms > chosen.rtt_ms)) chosen = w;
      if (w.tcp_limit_bytes > 0 && short_rank < 0) short_rank = r;
    }
    if (short_rank >= 0) {
      // Not an error: the ring still runs, at what TCP can carry. Said by
      // default, since no pipeline depth can make up for it.
      const Wish& w = wishes[static_cast<size_t>(short_rank)];
      RR_LOG(LogLevel::kWarn,
             "rank %d's link to its ring neighbour is TCP with a %.3f ms round trip at %.1f Gbit/s, a bandwidth-delay "
             "product of %.0f bytes, but this host's TCP keeps at most about %.0f bytes in flight (half of "
             "net.ipv4.tcp_rmem's maximum, or tcp_wmem's): the link cannot be filled. Raise both maxima on every host "
             "to 4 x the product (sysctl -w net.ipv4.tcp_rmem='4096 131072 N' net.ipv4.tcp_wmem='4096 16384 N').",
             short_rank, static_cast<double>(w.rtt_ms), static_cast<double>(w.gbps),
             bandwidth_delay_bytes(w), w.tcp_limit_bytes);
    }
    for (int r = 1; r < size_; ++r) batch_->add_send(r, setup_tag(7), &chosen, sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  } else {
    batch_->add_send(0, setup_tag(6), &mine, sizeof(Wish));
    batch_->add_recv(0, setup_tag(7), &chosen, sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  }
  const int chosen_by = chosen.rank;
  if (chosen.depth < 1 || chosen.depth > Settings::kMaxPipelineDepth) {
    return InternalError("rank 0 answered a pipeline depth of " + std::to_string(chosen.depth) + ", outside [1, " +
                         std::to_string(Settings::kMaxPipelineDepth) + "]");
  }
  if (chosen.depth != settings_.pipeline_depth) {
    if (!settings_.pipeline_depth_auto) {
      RR_LOG(LogLevel::kInfo, "rank %d: pipeline depth %d, not this rank's %d (%s): every rank takes the largest, "
             "rank %d's", rank_, chosen.depth, settings_.pipeline_depth, settings_.pipeline_depth_source.text().c_str(),
             chosen_by);
    }
    char why[128];
    if (settings_.pipeline_depth_auto) {
      std::snprintf(why, sizeof why, "a %.3f ms round trip at %.1f Gbit/s", static_cast<double>(chosen.rtt_ms),
                    static_cast<double>(chosen.gbps));
      settings_.pipeline_depth_source = {Source::Kind::kMeasured, why};
    } else {
      std::snprintf(why, sizeof why, "rank %d's, the largest", chosen_by);
      settings_.pipeline_depth_source = {Source::Kind::kPeer, why};
    }
    settings_.pipeline_depth = chosen.depth;
  }
  if (rank_ == 0 && across_hosts) {
    RR_LOG(LogLevel::kInfo,
           "rank 0: pipeline depth %d%s (%s; the largest any rank asked for, rank %d's: round trip %.3f ms at "
           "%.1f Gbit/s, a bandwidth-delay product of %.0f bytes, chunks of %zu bytes; this rank's link: %.3f ms, "
           "%.1f Gbit/s, %s)",
           chosen.depth, chosen.capped ? " (capped: the link wants more)" : "",
           settings_.pipeline_depth_auto ? "RR_PIPELINE_DEPTH unset: sized to the longest link" : "RR_PIPELINE_DEPTH set",
           chosen_by, static_cast<double>(chosen.rtt_ms), static_cast<double>(chosen.gbps),
           bandwidth_delay_bytes(chosen),
           settings_.chunk_bytes, rtt_s * 1e3, gbps, rate_from.c_str());
  }
  return Status::Ok();
}

}  // namespace rr
