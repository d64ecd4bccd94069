// rr-sim: what an allreduce would take on N ranks, from the engine's own
// schedules over a simulated network (sim.hpp), in rr-bench's columns.
//
//   rr-sim --ranks N --size BYTES [-e MAX -f FACTOR] --alpha SECONDS --link RATE
//          [--ranks-per-host K] [--placement block|cyclic] [--algo ring|rd|hd|oneshot|auto]
//          [--ring-order topology|rank] [--chunk-bytes B] [--pipeline-depth D]
//          [--local-alpha SECONDS] [--local-link RATE] [--reduce-rate RATE]
//          [--no-check] [--json FILE]

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "algo/select.hpp"
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
};

[[noreturn]] void usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "rr-sim: %s\n", why.c_str());
  std::fprintf(stderr,
               "usage: rr-sim --ranks N --size BYTES [-e MAX -f FACTOR] --alpha SECONDS --link RATE\n"
               "              [--ranks-per-host K] [--placement block|cyclic] [--algo ring|rd|hd|oneshot|auto]\n"
               "              [--ring-order topology|rank] [--chunk-bytes B] [--pipeline-depth D]\n"
               "              [--local-alpha SECONDS] [--local-link RATE] [--reduce-rate RATE]\n"
               "              [--no-check] [--json FILE]\n"
               "  sizes: 64M, 1K, 4096; rates: 100Gbit (bits per second), 12.5GB (bytes per second), or bytes\n"
               "  per second; --alpha 5e-6 or 5us. Defaults: alpha 5us, link 100Gbit, 1 rank per host, block,\n"
               "  auto (the engine's selector, its alpha-beta-gamma model fed this machine), topology order,\n"
               "  chunk 512K, depth 4, local alpha 0.5us, local link 8GB, reduction free.\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  o.machine.alpha_s = 5e-6;
  o.machine.link_Bps = 100e9 / 8;
  bool have_ranks = false, have_size = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    try {
      if (flag == "--ranks" || flag == "-n") o.machine.ranks = static_cast<int>(rrsim::parse_count(flag, value())), have_ranks = true;
      else if (flag == "--size" || flag == "-b") o.min_bytes = rrsim::parse_bytes(flag, value()), have_size = true;
      else if (flag == "-e" || flag == "--max-size") o.max_bytes = rrsim::parse_bytes(flag, value());
      else if (flag == "-f" || flag == "--factor") o.factor = std::stod(value());
      else if (flag == "--alpha") o.machine.alpha_s = rrsim::parse_seconds(flag, value());
      else if (flag == "--link") o.machine.link_Bps = rrsim::parse_rate(flag, value());
      else if (flag == "--ranks-per-host") o.machine.ranks_per_host = static_cast<int>(rrsim::parse_count(flag, value()));
      else if (flag == "--placement") {
        const std::string v = value();
        if (v != "block" && v != "cyclic") usage("--placement " + v + ": expected block or cyclic");
        o.machine.cyclic = v == "cyclic";
      } else if (flag == "--algo") {
        o.algo = value();
        if (o.algo != "ring" && o.algo != "rd" && o.algo != "hd" && o.algo != "oneshot" && o.algo != "auto") {
          usage("--algo " + o.algo + ": expected ring, rd, hd, oneshot or auto");
        }
      } else if (flag == "--ring-order") {
        const std::string v = value();
        if (v != "topology" && v != "rank") usage("--ring-order " + v + ": expected topology or rank");
        o.engine.topology_order = v == "topology";
      } else if (flag == "--chunk-bytes") o.engine.chunk_bytes = rrsim::parse_bytes(flag, value());
      else if (flag == "--pipeline-depth") o.engine.pipeline_depth = static_cast<int>(rrsim::parse_count(flag, value()));
      else if (flag == "--local-alpha") o.machine.local_alpha_s = rrsim::parse_seconds(flag, value());
      else if (flag == "--local-link") o.machine.local_Bps = rrsim::parse_rate(flag, value());
      else if (flag == "--reduce-rate") o.machine.reduce_Bps = rrsim::parse_rate(flag, value());
      else if (flag == "--no-check") o.engine.check_arguments = false;
      else if (flag == "--json") o.json = value();
      else if (flag == "-h" || flag == "--help") usage("");
      else usage("unknown flag " + flag);
    } catch (const std::invalid_argument& e) {
      usage(e.what());
    }
  }
  if (!have_ranks || o.machine.ranks < 1) usage("--ranks N (N >= 1) is required");
  if (!have_size) usage("--size BYTES is required");
  if (o.machine.ranks_per_host < 1) usage("--ranks-per-host must be at least 1");
  if (o.engine.chunk_bytes < 64) usage("--chunk-bytes must be at least 64");
  if (o.max_bytes < o.min_bytes) o.max_bytes = o.min_bytes;
  if (o.factor <= 1) usage("-f must be more than 1");
  return o;
}

const char* algorithm_name(const std::string& algo) {
  return algo == "rd"        ? "recursive doubling"
         : algo == "hd"      ? "halving-doubling"
         : algo == "oneshot" ? "one-shot (shared memory)"
                             : "ring";
}

struct Row {
  size_t bytes;
  std::string algo;
  rrsim::Result r;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
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
    FILE* f = std::fopen(o.json.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "rr-sim: cannot write %s: %s\n", o.json.c_str(), std::strerror(errno));
      return 1;
    }
    std::fprintf(f,
                 "{\n  \"tool\": \"rr-sim\",\n  \"nranks\": %d,\n  \"hosts\": %d,\n  \"ranks_per_host\": %d,\n"
                 "  \"placement\": \"%s\",\n  \"alpha_s\": %.9g,\n  \"link_Bps\": %.9g,\n  \"ring_order\": \"%s\",\n"
                 "  \"rows\": [",
                 m.ranks, m.hosts(), m.ranks_per_host, m.cyclic ? "cyclic" : "block", m.alpha_s, m.link_Bps,
                 o.engine.topology_order ? "topology" : "rank");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      const double algbw = row.r.seconds > 0 ? static_cast<double>(row.bytes) / row.r.seconds / 1e9 : 0.0;
      const double busbw = algbw * (m.ranks > 1 ? 2.0 * (m.ranks - 1) / m.ranks : 0.0);
      std::fprintf(f,
                   "%s\n    {\"backend\": \"rr-sim\", \"algorithm\": \"%s\", \"collective\": \"allreduce\", "
                   "\"size\": %zu, \"count\": %zu, \"time_us\": %.6g, \"algbw_GBps\": %.6g, \"busbw_GBps\": %.6g, "
                   "\"messages\": %llu, \"bytes_between_hosts\": %llu}",
                   i ? "," : "", algorithm_name(row.algo), row.bytes, row.bytes / 4,
                   row.r.seconds * 1e6, algbw, busbw, static_cast<unsigned long long>(row.r.messages),
                   static_cast<unsigned long long>(row.r.bytes_between_hosts));
    }
    std::fprintf(f, "\n  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
