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

// What a rank tells rank 0: the depth its link wants, and why.
struct Wish {
  int32_t depth = 0;
  int32_t capped = 0;
  float rtt_ms = 0;
  float gbps = 0;
};

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

  Wish chosen = mine;
  int chosen_by = rank_;
  if (rank_ == 0) {
    std::vector<Wish> wishes(static_cast<size_t>(size_), mine);
    for (int r = 1; r < size_; ++r) batch_->add_recv(r, setup_tag(6), &wishes[static_cast<size_t>(r)], sizeof(Wish));
    RR_RETURN_IF_ERROR(run_batch(*batch_, name));
    for (int r = 1; r < size_; ++r) {
      if (wishes[static_cast<size_t>(r)].depth > chosen.depth) chosen = wishes[static_cast<size_t>(r)], chosen_by = r;
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
