#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "command_line.hpp"

namespace soak {

namespace {

constexpr const char kUsage[] =
    "usage: rr-run -n N soak_rank [options]\n"
    "  --seconds S            run for S seconds, warm-up included (default 60)\n"
    "  --warmup-seconds S     resources are measured from the first sample after S seconds (default 10)\n"
    "  --sample-seconds S     sample each rank's resources every S seconds (default 5)\n"
    "  --seed N               the sequence of calls; the same on every rank (default 1)\n"
    "  --max-bytes B          largest buffer of a call, per rank: 64M, 1G, 4096 (default 64M)\n"
    "  --slots K              up to K calls in flight at once; slot 0 holds --max-bytes, the others 1/8 (default 4)\n"
    "  --json FILE            write every rank's samples, calls per second and the verdict (rank 0 writes)\n"
    "  --rss-tolerance-mib M  RSS may grow by M MiB after warm-up (default 8); open fds, threads,\n"
    "                         files in /dev/shm and mapped shared-memory segments may not grow at all\n"
    "  --no-shm-entries-check /dev/shm's file count is sampled but not required flat (a machine\n"
    "                         where other jobs make or leave segments at the same time)\n"
    "  --corrupt-reference C  make the reference of the first checked element of call C (or the next\n"
    "                         call that checks one) wrong: the run must fail naming it (tests the check)\n"
    "fuzzer (all off by default):\n"
    "  --idle-max-ms M        after a batch, with chance --idle-chance, sleep 0..M ms; each rank draws its\n"
    "                         own pauses (seeded by the seed and its rank), the calls stay the same on all\n"
    "  --idle-chance P        how often a batch is followed by a pause (default 0.25)\n"
    "  --random-shapes        each split communicator gets a chunk size (4 KiB..1 MiB, the same on every\n"
    "                         rank) and a pipeline depth (1..16, sometimes a different one per rank) drawn\n"
    "                         from the seed, remade with the churned communicator; rank 0 logs them\n"
    "  --threads              a batch's calls on different communicators are issued and waited from one\n"
    "                         thread per communicator, each in that communicator's program order\n"
    "exit status: 0 every result right and nothing grew; 1 a wrong result, an engine error or growth; 2 usage\n";

size_t parse_bytes(const rr::tools::CommandLine& command_line, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) command_line.exit_usage(std::string("--max-bytes takes a size like 64M, not '") + text + "'");
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, ++end;
  else if (*end == 'M' || *end == 'm') shift = 20, ++end;
  else if (*end == 'G' || *end == 'g') shift = 30, ++end;
  if (*end != '\0') command_line.exit_usage(std::string("--max-bytes takes a size like 64M, not '") + text + "'");
  return static_cast<size_t>(v) << shift;
}

// The shortest text that reads back as the same double.
std::string number(double v) {
  char text[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  bool no_shm_entries_check = false;
  std::string seconds, warmup, sample, seed, max_bytes, slots, rss, corrupt, idle_max, idle_chance;
  rr::tools::CommandLine command_line("soak_rank");
  CLI::App& app = command_line.app;
  app.add_flag("--no-shm-entries-check", no_shm_entries_check);
  app.add_flag("--random-shapes", o.random_shapes);
  app.add_flag("--threads", o.threads);
  app.add_option("--seconds", seconds);
  app.add_option("--warmup-seconds", warmup);
  app.add_option("--sample-seconds", sample);
  app.add_option("--seed", seed);
  app.add_option("--max-bytes", max_bytes);
  app.add_option("--slots", slots);
  app.add_option("--json", o.json);
  app.add_option("--rss-tolerance-mib", rss);
  app.add_option("--corrupt-reference", corrupt);
  app.add_option("--idle-max-ms", idle_max);
  app.add_option("--idle-chance", idle_chance);
  command_line.parse_or_exit(argc, argv, kUsage);
  if (no_shm_entries_check) o.shm_entries_check = false;
  const auto given = [&](const char* name) { return command_line.given(name); };
  if (given("--seconds")) o.seconds = command_line.number("--seconds", seconds);
  if (given("--warmup-seconds")) o.warmup_seconds = command_line.number("--warmup-seconds", warmup);
  if (given("--sample-seconds")) o.sample_seconds = command_line.number("--sample-seconds", sample);
  if (given("--seed")) o.seed = command_line.whole("--seed", seed);
  if (given("--max-bytes")) o.max_bytes = parse_bytes(command_line, max_bytes.c_str());
  if (given("--slots")) o.slots = static_cast<int>(command_line.number("--slots", slots));
  if (given("--rss-tolerance-mib")) o.rss_tolerance_mib = command_line.number("--rss-tolerance-mib", rss);
  if (given("--corrupt-reference")) o.corrupt_call = command_line.whole("--corrupt-reference", corrupt);
  if (given("--idle-max-ms")) o.idle_max_ms = command_line.number("--idle-max-ms", idle_max);
  if (given("--idle-chance")) o.idle_chance = command_line.number("--idle-chance", idle_chance);
  if (o.slots < 1 || o.slots > 16) command_line.exit_usage("--slots takes 1..16");
  if (o.warmup_seconds >= o.seconds) command_line.exit_usage("--warmup-seconds must be less than --seconds");
  if (o.sample_seconds <= 0) command_line.exit_usage("--sample-seconds must be positive");
  if (o.idle_chance > 1) command_line.exit_usage("--idle-chance takes a probability, 0..1");
  return o;
}

std::string replay_options(const Options& o) {
  std::string s = "--seconds " + number(o.seconds) + " --warmup-seconds " + number(o.warmup_seconds) +
                  " --sample-seconds " + number(o.sample_seconds) + " --seed " + std::to_string(o.seed) +
                  " --max-bytes " + std::to_string(o.max_bytes) + " --slots " + std::to_string(o.slots);
  if (o.rss_tolerance_mib != kDefaultRssToleranceMiB) s += " --rss-tolerance-mib " + number(o.rss_tolerance_mib);
  if (!o.shm_entries_check) s += " --no-shm-entries-check";
  if (o.corrupt_call != UINT64_MAX) s += " --corrupt-reference " + std::to_string(o.corrupt_call);
  if (o.idle_max_ms > 0) s += " --idle-max-ms " + number(o.idle_max_ms) + " --idle-chance " + number(o.idle_chance);
  if (o.random_shapes) s += " --random-shapes";
  if (o.threads) s += " --threads";
  return s;
}

}  // namespace soak
