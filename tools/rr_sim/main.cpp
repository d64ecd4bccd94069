// rr-sim: what an allreduce would take on N ranks, from the engine's own
// schedules over a simulated network (sim.hpp), in rr-bench's columns.
//
//   rr-sim --ranks N --size BYTES [-e MAX -f FACTOR] --alpha SECONDS --link RATE
//          [--ranks-per-host K] [--placement block|cyclic] [--algo ring|rd|hd|oneshot|auto]
//          [--ring-order topology|rank] [--chunk-bytes B] [--pipeline-depth D]
//          [--local-alpha SECONDS] [--local-link RATE] [--reduce-rate RATE]
//          [--no-check] [--json FILE]
//   rr-sim --shrink --ranks N [--lost L] [--die-during D] [--overhead SECONDS] [--detect SECONDS]
//          [--connect SECONDS] [machine options as above]

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algo/schedule.hpp"
#include "algo/select.hpp"
#include "command_line.hpp"
#include "shrink.hpp"
#include "sim.hpp"
#include "units.hpp"

namespace {

struct Options {
  rrsim::Machine machine;
  rrsim::Engine engine;
  size_t min_bytes = 0, max_bytes = 0;
  double factor = 2;
  std::string algo = "auto";
  std::string json;
  bool shrink = false;  // rrCommShrinkFailed's model (shrink.hpp) instead of allreduce
  rrsim::ShrinkModel shrink_model;
};

constexpr const char* kUsage =
    "usage: rr-sim --ranks N --size BYTES [-e MAX -f FACTOR] --alpha SECONDS --link RATE\n"
    "              [--ranks-per-host K] [--placement block|cyclic] [--algo ring|rd|hd|oneshot|auto]\n"
    "              [--ring-order topology|rank] [--chunk-bytes B] [--pipeline-depth D]\n"
    "              [--local-alpha SECONDS] [--local-link RATE] [--reduce-rate RATE]\n"
    "              [--no-check] [--json FILE]\n"
    "       rr-sim --shrink --ranks N [--lost L] [--die-during D] [--overhead SECONDS] [--detect SECONDS]\n"
    "              [--connect SECONDS] [the machine's options]\n"
    "  sizes: 64M, 1K, 4096; rates: 100Gbit (bits per second), 12.5GB (bytes per second), or bytes\n"
    "  per second; --alpha 5e-6 or 5us. Defaults: alpha 5us, link 100Gbit, 1 rank per host, block,\n"
    "  auto (the engine's selector, its alpha-beta-gamma model fed this machine), topology order,\n"
    "  chunk 512K, depth 4, local alpha 0.5us, local link 8GB, reduction free.\n";

// A bad command line: says why, then the usage text; exit status 2.
[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "rr-sim: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  o.machine.alpha_s = 5e-6;
  o.machine.link_Bps = 100e9 / 8;
  bool no_check = false;
  std::string ranks, size, max_size, factor, alpha, link, ranks_per_host, placement, ring_order, chunk_bytes,
      pipeline_depth, local_alpha, local_link, reduce_rate, lost, die_during, overhead, detect, connect;
  rr::tools::CommandLine command_line("rr-sim");
  CLI::App& app = command_line.app;
  app.add_flag("--no-check", no_check);
  app.add_option("-n,--ranks", ranks);
  app.add_option("-b,--size", size);
  app.add_option("-e,--max-size", max_size);
  app.add_option("-f,--factor", factor);
  app.add_option("--alpha", alpha);
  app.add_option("--link", link);
  app.add_option("--ranks-per-host", ranks_per_host);
  app.add_option("--placement", placement)->check(CLI::IsMember({"block", "cyclic"}));
  app.add_option("--algo", o.algo)->check(CLI::IsMember({"ring", "rd", "hd", "oneshot", "auto"}));
  app.add_option("--ring-order", ring_order)->check(CLI::IsMember({"topology", "rank"}));
  app.add_option("--chunk-bytes", chunk_bytes);
  app.add_option("--pipeline-depth", pipeline_depth);
  app.add_option("--local-alpha", local_alpha);
  app.add_option("--local-link", local_link);
  app.add_option("--reduce-rate", reduce_rate);
  app.add_option("--json", o.json);
  app.add_flag("--shrink", o.shrink);
  app.add_option("--lost", lost);
  app.add_option("--die-during", die_during);
  app.add_option("--overhead", overhead);
  app.add_option("--detect", detect);
  app.add_option("--connect", connect);
  command_line.parse_or_exit(argc, argv, kUsage);
  try {
    if (command_line.given("--ranks")) o.machine.ranks = static_cast<int>(rrsim::parse_count("--ranks", ranks));
    if (command_line.given("--size")) o.min_bytes = rrsim::parse_bytes("--size", size);
    if (command_line.given("-e")) o.max_bytes = rrsim::parse_bytes("-e", max_size);
    if (command_line.given("-f")) o.factor = rrsim::parse_number("-f", factor);
    if (command_line.given("--alpha")) o.machine.alpha_s = rrsim::parse_seconds("--alpha", alpha);
    if (command_line.given("--link")) o.machine.link_Bps = rrsim::parse_rate("--link", link);
    if (command_line.given("--ranks-per-host")) {
      o.machine.ranks_per_host = static_cast<int>(rrsim::parse_count("--ranks-per-host", ranks_per_host));
    }
    if (command_line.given("--placement")) o.machine.cyclic = placement == "cyclic";
    if (command_line.given("--ring-order")) o.engine.topology_order = ring_order == "topology";
    if (command_line.given("--chunk-bytes")) o.engine.chunk_bytes = rrsim::parse_bytes("--chunk-bytes", chunk_bytes);
    if (command_line.given("--pipeline-depth")) {
      o.engine.pipeline_depth = static_cast<int>(rrsim::parse_count("--pipeline-depth", pipeline_depth));
    }
    if (command_line.given("--local-alpha")) o.machine.local_alpha_s = rrsim::parse_seconds("--local-alpha", local_alpha);
    if (command_line.given("--local-link")) o.machine.local_Bps = rrsim::parse_rate("--local-link", local_link);
    if (command_line.given("--reduce-rate")) o.machine.reduce_Bps = rrsim::parse_rate("--reduce-rate", reduce_rate);
    rrsim::ShrinkModel& sm = o.shrink_model;
    if (command_line.given("--lost")) sm.lost = static_cast<int>(rrsim::parse_number("--lost", lost));
    if (command_line.given("--die-during")) sm.die_during = static_cast<int>(rrsim::parse_number("--die-during", die_during));
    if (command_line.given("--overhead")) sm.overhead_s = rrsim::parse_seconds("--overhead", overhead);
    if (command_line.given("--detect")) sm.detect_s = rrsim::parse_seconds("--detect", detect);
    if (command_line.given("--connect")) sm.connect_s = rrsim::parse_seconds("--connect", connect);
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (no_check) o.engine.check_arguments = false;
  if (!command_line.given("--ranks") || o.machine.ranks < 1) usage("--ranks N (N >= 1) is required");
  if (!command_line.given("--size") && !o.shrink) usage("--size BYTES is required");
  if (o.shrink && (o.shrink_model.lost < 0 || o.shrink_model.die_during < 0 ||
                   o.shrink_model.lost + o.shrink_model.die_during >= o.machine.ranks)) {
    usage("--lost and --die-during: at least 0 each, and fewer than --ranks together");
  }
  if (o.machine.ranks_per_host < 1) usage("--ranks-per-host must be at least 1");
  if (o.engine.chunk_bytes < 64) usage("--chunk-bytes must be at least 64");
  if (o.max_bytes < o.min_bytes) o.max_bytes = o.min_bytes;
  if (o.factor <= 1) usage("-f must be more than 1");
  return o;
}

// As the engine reports it (algo/schedule.hpp): the ring is the transport's.
const char* algorithm_name(const std::string& algo) {
  rr::algo::AllreduceAlgo chosen = rr::algo::AllreduceAlgo::kRing;
  rr::algo::parse_algo(algo, &chosen);
  return rr::algo::schedule_name(rr::algo::allreduce_schedule(chosen, false));
}

struct Row {
  size_t bytes;
  std::string algo;
  rrsim::Result r;
};

}  // namespace

// --shrink: one line of rrCommShrinkFailed's cost (shrink.hpp).
int print_shrink(const Options& o) {
  const rrsim::Machine& m = o.machine;
  const rrsim::ShrinkModel& s = o.shrink_model;
  std::printf("# rr-sim --shrink: %d ranks on %d hosts (%d per host), alpha %s, link %s, local alpha %s; %d lost before, "
              "%d dying during; overhead %s per message, detection %s, connection %s\n",
              m.ranks, m.hosts(), m.ranks_per_host, rrsim::format_seconds(m.alpha_s).c_str(),
              rrsim::format_rate(m.link_Bps).c_str(), rrsim::format_seconds(m.local_alpha_s).c_str(), s.lost,
              s.die_during, rrsim::format_seconds(s.overhead_s).c_str(), rrsim::format_seconds(s.detect_s).c_str(),
              rrsim::format_seconds(s.connect_s).c_str());
  std::printf("# %8s  %9s  %6s  %12s  %12s  %10s  %12s  %10s  %10s\n", "ranks", "survivors", "rounds", "agree msgs",
              "agree bytes", "agree (ms)", "shrink msgs", "shrink(ms)", "total (ms)");
  const rrsim::ShrinkResult r = rrsim::simulate_shrink_failed(m, s);
  std::printf("  %8d  %9d  %6d  %12llu  %12llu  %10.3f  %12llu  %10.3f  %10.3f\n", m.ranks, r.survivors, r.rounds,
              static_cast<unsigned long long>(r.agreement_messages), static_cast<unsigned long long>(r.agreement_bytes),
              r.agreement_s * 1e3, static_cast<unsigned long long>(r.shrink_messages), r.shrink_s * 1e3, r.total_s * 1e3);
  return 0;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.shrink) return print_shrink(o);
  const rrsim::Machine& m = o.machine;
  // The engine's selector, fed the simulated machine's constants.
  rr::algo::CostModel model;
  model.alpha_s = m.local_alpha_s;
  model.remote_alpha_s = m.alpha_s;
  model.beta_s_per_byte = 1.0 / m.link_Bps;
  model.gamma_s_per_byte = m.reduce_Bps > 0 ? 1.0 / m.reduce_Bps : 0.0;
  model.slot_alpha_s = m.local_alpha_s;
  rr::algo::HostShape shape;
  shape.hosts = m.hosts();
  shape.ranks_per_host = m.ranks_per_host;
  // One host: the engine's same-host board (one-shot) is there.
  if (m.hosts() == 1) shape.board_bytes = o.engine.board_bytes;
  if (o.algo == "oneshot" && m.hosts() > 1) usage("--algo oneshot: needs every rank on one host (the same-host board)");
  const std::vector<int> order = rrsim::ring_order(m, o.engine);
  std::printf("# rr-sim: %d ranks on %d hosts (%d per host, %s), alpha %s, link %s, local alpha %s, local link %s, "
              "reduce %s\n",
              m.ranks, m.hosts(), m.ranks_per_host, m.cyclic ? "cyclic" : "block", rrsim::format_seconds(m.alpha_s).c_str(),
              rrsim::format_rate(m.link_Bps).c_str(), rrsim::format_seconds(m.local_alpha_s).c_str(),
              rrsim::format_rate(m.local_Bps).c_str(), m.reduce_Bps > 0 ? rrsim::format_rate(m.reduce_Bps).c_str() : "free");
  std::string ring;
  for (size_t p = 0; p < order.size() && p < 32; ++p) ring += (p ? " " : "") + std::to_string(order[p]);
  if (order.size() > 32) ring += " ...";
  std::printf("# engine: chunk %zu B, depth %d, ring order %s (%s), argument check %s, --algo %s\n",
              o.engine.chunk_bytes, o.engine.pipeline_depth, o.engine.topology_order ? "topology" : "rank", ring.c_str(),
              o.engine.check_arguments ? "on" : "off", o.algo.c_str());
  std::printf("# float32 sum; time: the last rank's; algbw = size / time; busbw = algbw x 2(N-1)/N\n");
  std::printf("# %10s  %12s  %10s  %8s  %8s  %10s  %s\n", "size", "count", "time", "algbw", "busbw", "messages",
              "algorithm");
  std::printf("# %10s  %12s  %10s  %8s  %8s  %10s\n", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "");
  std::vector<Row> rows;
  const auto wall0 = std::chrono::steady_clock::now();
  for (double size = static_cast<double>(o.min_bytes);; size *= o.factor) {
    const size_t bytes = static_cast<size_t>(size) / 4 * 4;
    std::string algo = o.algo;
    if (algo == "auto") {
      algo = rr::algo::algo_name(rr::algo::choose_allreduce(rr::algo::AllreduceAlgo::kAuto, model, m.ranks, bytes, shape));
    }
    const rrsim::Result r = algo == "rd"        ? rrsim::simulate_recursive_doubling(m, o.engine, bytes)
                            : algo == "hd"      ? rrsim::simulate_halving_doubling(m, o.engine, bytes)
                            : algo == "oneshot" ? rrsim::simulate_one_shot(m, o.engine, bytes)
                                                : rrsim::simulate_ring(m, o.engine, bytes);
    const double algbw = r.seconds > 0 ? static_cast<double>(bytes) / r.seconds / 1e9 : 0.0;
    const double busbw = algbw * (m.ranks > 1 ? 2.0 * (m.ranks - 1) / m.ranks : 0.0);
    std::printf("  %10zu  %12zu  %10.2f  %8.3f  %8.3f  %10llu  %s\n", bytes, bytes / 4, r.seconds * 1e6, algbw, busbw,
                static_cast<unsigned long long>(r.messages), algorithm_name(algo));
    std::fflush(stdout);
    rows.push_back(Row{bytes, algo, r});
    if (size * o.factor > static_cast<double>(o.max_bytes) + 0.5) break;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  std::printf("# simulated in %.2f s\n", wall);
  if (!o.json.empty()) {
    using Json = nlohmann::ordered_json;
    Json doc{{"tool", "rr-sim"},
             {"nranks", m.ranks},
             {"hosts", m.hosts()},
             {"ranks_per_host", m.ranks_per_host},
             {"placement", m.cyclic ? "cyclic" : "block"},
             {"alpha_s", m.alpha_s},
             {"link_Bps", m.link_Bps},
             {"ring_order", o.engine.topology_order ? "topology" : "rank"},
             {"rows", Json::array()}};
    for (const Row& row : rows) {
      const double algbw = row.r.seconds > 0 ? static_cast<double>(row.bytes) / row.r.seconds / 1e9 : 0.0;
      const double busbw = algbw * (m.ranks > 1 ? 2.0 * (m.ranks - 1) / m.ranks : 0.0);
      doc["rows"].push_back(Json{{"backend", "rr-sim"},
                                 {"algorithm", algorithm_name(row.algo)},
                                 {"collective", "allreduce"},
                                 {"size", row.bytes},
                                 {"count", row.bytes / 4},
                                 {"time_us", row.r.seconds * 1e6},
                                 {"algbw_GBps", algbw},
                                 {"busbw_GBps", busbw},
                                 {"messages", row.r.messages},
                                 {"bytes_between_hosts", row.r.bytes_between_hosts}});
    }
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "rr-sim: cannot write %s: %s\n", o.json.c_str(), std::strerror(errno));
      return 1;
    }
    const std::string text = doc.dump(2) + "\n";
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
