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

}  // namespace

Status Communicator::size_pipeline() {
  if (!settings_.pipeline_depth_auto) return Status::Ok();
  // A communicator made by split() starts from its parent's settings, sized
  // for the parent's links.
  settings_.pipeline_depth = Settings::kDefaultPipelineDepth;
  const std::vector<int> hosts = transport_->host_of_ranks();
  if (size_ < 2 || hosts.size() != static_cast<size_t>(size_) || host_shape_.hosts < 2) return Status::Ok();

  const std::vector<int> order = ring_order();
  const algo::RingSchedule ring(size_, rank_, 1, 1, 0, algo::RingPhases::kBoth, order.data());
  const int left = ring.left(), right = ring.right();
  const bool ping = hosts[static_cast<size_t>(right)] != hosts[static_cast<size_t>(rank_)];
  const bool echo = hosts[static_cast<size_t>(left)] != hosts[static_cast<size_t>(rank_)];
  const std::string name = "communicator setup (round trips to the ring's neighbours on other hosts)";
  double rtt_s = 0;
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

  // This rank's link rate: the setting, else what its interface reports.
  double gbps = settings_.link_gbps;
  std::string rate_from = settings_.link_gbps_source;
  if (!(gbps > 0)) {
    const topo::LinkSpeed link = topo::fastest_link(topo::ucx_net_devices());
    gbps = link.gbps > 0 ? link.gbps : Settings::kDefaultLinkGbps;
    rate_from = link.gbps > 0 ? "the speed " + link.device + " reports" : "no interface reports a speed";
  }
  Wish mine;
  const algo::PipelineChoice choice = algo::depth_for_link(rtt_s, gbps * 1e9 / 8, settings_.chunk_bytes,
                                                           Settings::kDefaultPipelineDepth, Settings::kMaxPipelineDepth);
  mine.depth = choice.depth;
  mine.capped = choice.capped ? 1 : 0;
  mine.rtt_ms = static_cast<float>(rtt_s * 1e3);
  mine.gbps = static_cast<float>(gbps);
  const double bdp_bytes = rtt_s * gbps * 1e9 / 8;
  if (ping && transport_->describe_path(right).find("tcp/") != std::string::npos) {
    const double ceiling = tcp_in_flight_ceiling();
    if (ceiling > 0 && ceiling < bdp_bytes) mine.tcp_limit_bytes = ceiling;
  }

  Wish chosen = mine;
  int chosen_by = rank_;
  if (rank_ == 0) {
    std::vector<Wish> wishes(static_cast<size_t>(size_), mine);
    for (int r = 1; r < size_; ++r) batch_->add_recv(r, setup_tag(6), &wishes[static_cast<size_t>(r)], sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
    int short_rank = -1;
    for (int r = 0; r < size_; ++r) {
      const Wish& w = wishes[static_cast<size_t>(r)];
      if (w.depth > chosen.depth) chosen = w, chosen_by = r;
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
             static_cast<double>(w.rtt_ms) * 1e-3 * static_cast<double>(w.gbps) * 1e9 / 8, w.tcp_limit_bytes);
    }
    for (int r = 1; r < size_; ++r) batch_->add_send(r, setup_tag(7), &chosen, sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  } else {
    batch_->add_send(0, setup_tag(6), &mine, sizeof(Wish));
    batch_->add_recv(0, setup_tag(7), &chosen, sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
  }
  if (chosen.depth < Settings::kDefaultPipelineDepth || chosen.depth > Settings::kMaxPipelineDepth) {
    return InternalError("rank 0 answered a pipeline depth of " + std::to_string(chosen.depth) + ", outside [" +
                    std::to_string(Settings::kDefaultPipelineDepth) + ", " +
                    std::to_string(Settings::kMaxPipelineDepth) + "]");
  }
  settings_.pipeline_depth = chosen.depth;
  if (chosen.depth > Settings::kDefaultPipelineDepth) {
    char why[96];
    std::snprintf(why, sizeof why, "auto: a %.3f ms round trip at %.1f Gbit/s", static_cast<double>(chosen.rtt_ms),
                  static_cast<double>(chosen.gbps));
    settings_.pipeline_depth_source = why;
  }
  if (rank_ == 0) {
    RR_LOG(LogLevel::kInfo,
           "rank 0: pipeline depth %d%s (RR_PIPELINE_DEPTH unset: sized to the longest link, from rank %d's: "
           "round trip %.3f ms at %.1f Gbit/s, a bandwidth-delay product of %.0f bytes, chunks of %zu bytes; this rank's link: %.3f ms, "
           "%.1f Gbit/s, %s)",
           chosen.depth, chosen.capped ? " (capped: the link wants more)" : "", chosen_by,
           static_cast<double>(chosen.rtt_ms), static_cast<double>(chosen.gbps),
           static_cast<double>(chosen.rtt_ms) * 1e-3 * static_cast<double>(chosen.gbps) * 1e9 / 8,
           settings_.chunk_bytes, rtt_s * 1e3, gbps, rate_from.c_str());
  }
  return Status::Ok();
}

}  // namespace rr
