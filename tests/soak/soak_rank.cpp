// soak_rank: one rank of the soak, an env:// program launched by rr-run
// (build/tools/rr-run -n 3 build/tests/soak/soak_rank --seconds 60). It runs
// the engine the way a training job does, for as long as asked: every rank
// draws the same seeded sequence of calls (plan.hpp) of every collective and
// point-to-point form, blocking and Async, in place and out of place, every
// dtype x op, 0 B to --max-bytes, on the world and on split communicators
// with work in flight on several at once, and checks every result
// (calls.hpp, check.cpp). It reports calls per second, samples each rank's
// resources (resources.hpp) and fails if any grew after warm-up.
//
// Only the public C API: this is what a framework embedding ringreduce sees.

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "calls.hpp"
#include "plan.hpp"
#include "resources.hpp"
#include "ringreduce/ringreduce.h"

namespace soak {
namespace {

// RSS may wander by the allocator's caching of freed blocks and by pages the
// engine touches once (pools, UCX's rendezvous buffers); a leak of a few
// bytes per call over a million calls, or of one buffer per call, grows
// past this.
constexpr double kDefaultRssToleranceMiB = 8;

// Batches between two control broadcasts from rank 0 (stop? sample?): the
// ranks must agree when to stop and when to sample, so rank 0's clock
// decides; 16 batches are at most a few hundred ms on a busy 2-core machine.
constexpr uint64_t kControlPeriod = 16;

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
    "exit status: 0 every result right and nothing grew; 1 a wrong result, an engine error or growth; 2 usage\n";

struct Options {
  double seconds = 60;
  double warmup_seconds = 10;
  double sample_seconds = 5;
  uint64_t seed = 1;
  size_t max_bytes = size_t{64} << 20;
  int slots = 4;
  std::string json;
  double rss_tolerance_mib = kDefaultRssToleranceMiB;
  bool shm_entries_check = true;
  uint64_t corrupt_call = UINT64_MAX;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "soak_rank: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

double parse_number(const char* name, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v >= 0)) usage_error(std::string(name) + " takes a number, not '" + text + "'");
  return v;
}

size_t parse_bytes(const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) usage_error(std::string("--max-bytes takes a size like 64M, not '") + text + "'");
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, ++end;
  else if (*end == 'M' || *end == 'm') shift = 20, ++end;
  else if (*end == 'G' || *end == 'g') shift = 30, ++end;
  if (*end != '\0') usage_error(std::string("--max-bytes takes a size like 64M, not '") + text + "'");
  return static_cast<size_t>(v) << shift;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a == "--no-shm-entries-check") {
      o.shm_entries_check = false;
      continue;
    }
    if (i + 1 >= argc) usage_error(a + " needs a value (or is not an option)");
    const char* v = argv[++i];
    if (a == "--seconds") o.seconds = parse_number("--seconds", v);
    else if (a == "--warmup-seconds") o.warmup_seconds = parse_number("--warmup-seconds", v);
    else if (a == "--sample-seconds") o.sample_seconds = parse_number("--sample-seconds", v);
    else if (a == "--seed") o.seed = static_cast<uint64_t>(parse_number("--seed", v));
    else if (a == "--max-bytes") o.max_bytes = parse_bytes(v);
    else if (a == "--slots") o.slots = static_cast<int>(parse_number("--slots", v));
    else if (a == "--json") o.json = v;
    else if (a == "--rss-tolerance-mib") o.rss_tolerance_mib = parse_number("--rss-tolerance-mib", v);
    else if (a == "--corrupt-reference") o.corrupt_call = static_cast<uint64_t>(parse_number("--corrupt-reference", v));
    else usage_error("unknown option " + a);
  }
  if (o.slots < 1 || o.slots > 16) usage_error("--slots takes 1..16");
  if (o.warmup_seconds >= o.seconds) usage_error("--warmup-seconds must be less than --seconds");
  if (o.sample_seconds <= 0) usage_error("--sample-seconds must be positive");
  return o;
}

void check(rrResult_t r, const char* what, rrComm_t comm) {
  if (r != rrSuccess) die(std::string(what) + " failed: " + rrGetErrorString(r) + ": " + rrGetLastError(comm));
}

// Allocated and written once: the buffers' pages are in RSS before the
// baseline, so RSS measures the engine, not the soak.
std::vector<Slot> make_slots(const Options& o) {
  std::vector<Slot> slots(static_cast<size_t>(o.slots));
  for (size_t s = 0; s < slots.size(); ++s) {
    const size_t bytes = s == 0 ? o.max_bytes : o.max_bytes / 8;
    const size_t allocated = (bytes + 4095) / 4096 * 4096 + 4096;
    slots[s].bytes = bytes;
    slots[s].send = static_cast<uint8_t*>(std::aligned_alloc(4096, allocated));
    slots[s].recv = static_cast<uint8_t*>(std::aligned_alloc(4096, allocated));
    if (!slots[s].send || !slots[s].recv) die("cannot allocate " + std::to_string(2 * allocated) + " bytes of buffers");
    std::memset(slots[s].send, 0, allocated);
    std::memset(slots[s].recv, 0, allocated);
  }
  return slots;
}

// The figures that may not grow after warm-up, compared on this rank: a
// message per resource that grew, empty when none did.
std::string growth(const Sample& base, const Sample& end, const Options& o, int rank) {
  std::string out;
  const std::string who = "rank " + std::to_string(rank) + ": ";
  const double rss_growth_mib = (static_cast<double>(end.rss_kib) - static_cast<double>(base.rss_kib)) / 1024.0;
  char text[512];
  if (rss_growth_mib > o.rss_tolerance_mib) {
    std::snprintf(text, sizeof(text),
                  "%sRSS grew from %.1f MiB at warm-up end (t=%.0f s) to %.1f MiB at t=%.0f s: +%.1f MiB, "
                  "tolerance %.1f MiB\n",
                  who.c_str(), base.rss_kib / 1024.0, base.t, end.rss_kib / 1024.0, end.t, rss_growth_mib,
                  o.rss_tolerance_mib);
    out += text;
  }
  auto flat = [&](const char* what, int before, int after) {
    if (after <= before) return;
    std::snprintf(text, sizeof(text), "%s%s grew from %d at warm-up end (t=%.0f s) to %d at t=%.0f s\n", who.c_str(),
                  what, before, base.t, after, end.t);
    out += text;
  };
  flat("open file descriptors", base.fds, end.fds);
  flat("threads", base.threads, end.threads);
  flat("mapped shared-memory segments", base.shm_mapped, end.shm_mapped);
  if (o.shm_entries_check && end.shm_entries > base.shm_entries) {
    flat("/dev/shm files", base.shm_entries, end.shm_entries);
    std::string names;
    for (const std::string& name : shm_segments()) names += " " + name;
    out += who + "/dev/shm holds now:" + names + "\n";
  }
  return out;
}

// Before each sample every communicator exchanges one element with every
// peer through an Async call: what an engine makes lazily (a worker thread,
// a peer's endpoint and mapped segments) then exists on every communicator,
// also on one split again moments ago, so two samples count the same things.
void settle(std::vector<Comm>& comms) {
  static uint8_t out[4096], in[4096];
  for (Comm& c : comms) {
    if (c.size > static_cast<int>(sizeof(out))) continue;
    rrRequest_t request = nullptr;
    check(rrAllToAllAsync(out, in, 1, rrUint8, c.handle, &request), "rrAllToAllAsync (settle)", c.handle);
    check(rrWait(request), "rrWait (settle)", c.handle);
  }
}

struct Report {
  double warm_t = 0, end_t = 0;
  Stats at_warm, at_end;
};

void print_rates(const Report& r, const Options& o, int nranks) {
  const double span = r.end_t - r.warm_t;
  const uint64_t measured = r.at_end.calls() - r.at_warm.calls();
  std::printf("soak: %d ranks, seed %" PRIu64 ", %.1f s (%.1f s warm-up), max %zu bytes: %" PRIu64
              " calls, %" PRIu64 " after warm-up in %.1f s: %.1f calls/s\n",
              nranks, o.seed, r.end_t, r.warm_t, o.max_bytes, r.at_end.calls(), measured, span,
              span > 0 ? static_cast<double>(measured) / span : 0.0);
  std::printf("soak:   %-20s %10s %10s %10s %10s\n", "kind (after warm-up)", "blocking", "async", "calls/s", "MiB/s");
  for (int k = 0; k < kNumKinds; ++k) {
    const KindCount& a = r.at_warm.kinds[static_cast<size_t>(k)];
    const KindCount& b = r.at_end.kinds[static_cast<size_t>(k)];
    const uint64_t calls = b.blocking + b.async - a.blocking - a.async;
    std::printf("soak:   %-20s %10" PRIu64 " %10" PRIu64 " %10.1f %10.1f\n", kind_name(static_cast<Kind>(k)),
                b.blocking - a.blocking, b.async - a.async, span > 0 ? calls / span : 0.0,
                span > 0 ? static_cast<double>(b.bytes - a.bytes) / span / (1 << 20) : 0.0);
  }
}

void write_json(const Options& o, int nranks, const Report& r, const std::vector<double>& all, size_t per_rank,
                const std::vector<std::string>& verdicts) {
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) die("cannot write " + o.json + ": " + std::strerror(errno));
  const double span = r.end_t - r.warm_t;
  std::fprintf(f, "{\n  \"program\": \"soak_rank\",\n  \"nranks\": %d,\n  \"seed\": %" PRIu64 ",\n", nranks, o.seed);
  std::fprintf(f, "  \"seconds\": %g,\n  \"warmup_seconds\": %g,\n  \"sample_seconds\": %g,\n", o.seconds,
               o.warmup_seconds, o.sample_seconds);
  std::fprintf(f, "  \"max_bytes\": %zu,\n  \"slots\": %d,\n  \"rss_tolerance_mib\": %g,\n", o.max_bytes, o.slots,
               o.rss_tolerance_mib);
  std::fprintf(f, "  \"warmup_end_s\": %.3f,\n  \"end_s\": %.3f,\n", r.warm_t, r.end_t);
  const uint64_t measured = r.at_end.calls() - r.at_warm.calls();
  std::fprintf(f, "  \"calls\": {\"total\": %" PRIu64 ", \"after_warmup\": %" PRIu64 ", \"per_second\": %.2f},\n",
               r.at_end.calls(), measured, span > 0 ? measured / span : 0.0);
  std::fprintf(f, "  \"kinds\": [\n");
  for (int k = 0; k < kNumKinds; ++k) {
    const KindCount& a = r.at_warm.kinds[static_cast<size_t>(k)];
    const KindCount& b = r.at_end.kinds[static_cast<size_t>(k)];
    const uint64_t calls = b.blocking + b.async - a.blocking - a.async;
    std::fprintf(f,
                 "    {\"kind\": \"%s\", \"blocking\": %" PRIu64 ", \"async\": %" PRIu64
                 ", \"per_second\": %.2f, \"bytes\": %" PRIu64 "}%s\n",
                 kind_name(static_cast<Kind>(k)), b.blocking - a.blocking, b.async - a.async,
                 span > 0 ? calls / span : 0.0, b.bytes - a.bytes, k + 1 < kNumKinds ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"ranks\": [\n");
  const size_t fields = 7;
  const size_t samples = per_rank / fields;
  for (int rank = 0; rank < nranks; ++rank) {
    std::string verdict = verdicts[static_cast<size_t>(rank)];
    for (char& ch : verdict) ch = ch == '\n' ? ' ' : (ch == '"' ? '\'' : ch);
    std::fprintf(f, "    {\"rank\": %d, \"growth\": \"%s\", \"samples\": [\n", rank, verdict.c_str());
    for (size_t s = 0; s < samples; ++s) {
      const double* v = &all[static_cast<size_t>(rank) * per_rank + s * fields];
      std::fprintf(f,
                   "      {\"t\": %.3f, \"calls\": %.0f, \"rss_kib\": %.0f, \"fds\": %.0f, \"threads\": %.0f, "
                   "\"shm_entries\": %.0f, \"shm_mapped\": %.0f}%s\n",
                   v[0], v[1], v[2], v[3], v[4], v[5], v[6], s + 1 < samples ? "," : "");
    }
    std::fprintf(f, "    ]}%s\n", rank + 1 < nranks ? "," : "");
  }
  bool pass = true;
  for (const std::string& v : verdicts) pass = pass && v.empty();
  std::fprintf(f, "  ],\n  \"result\": \"%s\"\n}\n", pass ? "pass" : "fail");
  std::fclose(f);
}

int run(const Options& o) {
  std::vector<Comm> comms(kNumComms);
  rrResult_t r = rrCommInitFromEnv(&comms[kWorld].handle);
  if (r != rrSuccess) die(std::string("rrCommInitFromEnv failed: ") + rrGetErrorString(r) + ": " + rrGetLastError(nullptr));
  int rank = 0, nranks = 1;
  check(rrCommUserRank(comms[kWorld].handle, &rank), "rrCommUserRank", comms[kWorld].handle);
  check(rrCommCount(comms[kWorld].handle, &nranks), "rrCommCount", comms[kWorld].handle);
  rrComm_t world = comms[kWorld].handle;
  check(rrCommSplit(world, 0, rank, &comms[kDup].handle, nullptr), "rrCommSplit (dup)", world);
  check(rrCommSplit(world, 2 * rank < nranks ? 0 : 1, rank, &comms[kHalf].handle, nullptr), "rrCommSplit (half)", world);
  check(rrCommSplit(world, 0, nranks - 1 - rank, &comms[kReversed].handle, nullptr), "rrCommSplit (reversed)", world);
  for (Comm& c : comms) learn_members(&c, rank);

  std::vector<Slot> slots = make_slots(o);
  PlanOptions plan;
  plan.seed = o.seed;
  plan.max_bytes = o.max_bytes;
  for (const Slot& s : slots) plan.slot_bytes.push_back(s.bytes);
  Planner planner(plan);
  Runner runner(o.seed, rank, nranks, &comms, &slots);
  runner.corrupt_reference_of(o.corrupt_call);

  std::vector<Sample> samples;
  samples.reserve(static_cast<size_t>(o.seconds / o.sample_seconds) + 16);
  check(rrBarrier(world, nullptr), "rrBarrier (start)", world);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto take_sample = [&] {
    settle(comms);
    Sample s = sample_resources();
    s.t = elapsed();
    s.calls = runner.stats().calls();
    samples.push_back(s);
    if (rank == 0) {
      std::printf("soak: t=%6.0f s %10" PRIu64 " calls   rank 0: RSS %.1f MiB, %d fds, %d threads, /dev/shm %d "
                  "files, %d segments mapped\n",
                  s.t, s.calls, s.rss_kib / 1024.0, s.fds, s.threads, s.shm_entries, s.shm_mapped);
      std::fflush(stdout);
    }
  };
  take_sample();

  Report report;
  size_t warm_sample = SIZE_MAX;
  double last_sample = 0;
  for (uint64_t batches = 1;; ++batches) {
    runner.run(planner.next());
    if (batches % kControlPeriod != 0) continue;
    // [0] stop, [1] sample, [2] warm-up ends: decided by rank 0's clock.
    int32_t control[3] = {0, 0, 0};
    if (rank == 0) {
      const double t = elapsed();
      control[0] = t >= o.seconds;
      control[2] = warm_sample == SIZE_MAX && t >= o.warmup_seconds;
      control[1] = control[0] || control[2] || t - last_sample >= o.sample_seconds;
      if (control[1]) last_sample = t;
    }
    check(rrBroadcast(control, control, 3, rrInt32, 0, world, nullptr), "rrBroadcast (control)", world);
    if (control[1]) take_sample();
    if (control[2]) {
      warm_sample = samples.size() - 1;
      report.warm_t = samples.back().t;
      report.at_warm = runner.stats();
    }
    if (control[0]) break;
  }
  report.end_t = samples.back().t;
  report.at_end = runner.stats();

  // Every rank's verdict, then every rank's samples on rank 0 (for --json).
  const std::string grew = growth(samples[warm_sample], samples.back(), o, rank);
  if (!grew.empty()) std::fprintf(stderr, "soak: RESOURCE GROWTH after warm-up:\n%s", grew.c_str());
  const size_t fields = 7;
  std::vector<double> mine;
  for (const Sample& s : samples) {
    for (double v : {s.t, static_cast<double>(s.calls), static_cast<double>(s.rss_kib), static_cast<double>(s.fds),
                     static_cast<double>(s.threads), static_cast<double>(s.shm_entries),
                     static_cast<double>(s.shm_mapped)}) {
      mine.push_back(v);
    }
  }
  std::vector<double> all(rank == 0 ? mine.size() * static_cast<size_t>(nranks) : 0);
  check(rrGather(mine.data(), all.data(), mine.size(), rrFloat64, 0, world, nullptr), "rrGather (samples)", world);
  int32_t failed = grew.empty() ? 0 : 1;
  check(rrAllReduce(&failed, &failed, 1, rrInt32, rrMax, world, nullptr), "rrAllReduce (verdict)", world);
  if (rank == 0) {
    print_rates(report, o, nranks);
    std::vector<std::string> verdicts;
    for (int p = 0; p < nranks; ++p) {
      const double* v = &all[static_cast<size_t>(p) * mine.size()];
      auto at = [&](size_t s) {
        const double* x = v + s * fields;
        Sample out;
        out.t = x[0], out.calls = static_cast<uint64_t>(x[1]), out.rss_kib = static_cast<uint64_t>(x[2]);
        out.fds = static_cast<int>(x[3]), out.threads = static_cast<int>(x[4]);
        out.shm_entries = static_cast<int>(x[5]), out.shm_mapped = static_cast<int>(x[6]);
        return out;
      };
      const Sample base = at(warm_sample), end = at(samples.size() - 1);
      verdicts.push_back(growth(base, end, o, p));
      std::printf("soak:   rank %d  warm-up end (t=%.0f s) -> end (t=%.0f s): RSS %.1f -> %.1f MiB, fds %d -> %d, "
                  "threads %d -> %d, /dev/shm files %d -> %d, segments mapped %d -> %d\n",
                  p, base.t, end.t, base.rss_kib / 1024.0, end.rss_kib / 1024.0, base.fds, end.fds, base.threads,
                  end.threads, base.shm_entries, end.shm_entries, base.shm_mapped, end.shm_mapped);
    }
    if (!o.json.empty()) write_json(o, nranks, report, all, mine.size(), verdicts);
    std::printf("soak: %s\n", failed ? "FAILED: resources grew after warm-up (see above)"
                                     : "passed: every result right, no resource grew after warm-up");
    std::fflush(stdout);
  }
  for (int c = kNumComms - 1; c >= 0; --c) check(rrCommDestroy(comms[static_cast<size_t>(c)].handle), "rrCommDestroy", nullptr);
  for (Slot& s : slots) std::free(s.send), std::free(s.recv);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace soak

int main(int argc, char** argv) { return soak::run(soak::parse(argc, argv)); }
