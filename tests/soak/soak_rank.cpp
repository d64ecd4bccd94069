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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "calls.hpp"
#include "options.hpp"
#include "plan.hpp"
#include "resources.hpp"
#include "shapes.hpp"
#include "values.hpp"
#include "ringreduce/ringreduce.h"

namespace soak {
namespace {

// Batches between two control broadcasts from rank 0 (stop? sample?): the
// ranks must agree when to stop and when to sample, so rank 0's clock
// decides; 16 batches are at most a few hundred ms on a busy 2-core machine.
constexpr uint64_t kControlPeriod = 16;

// After a failure the rank stays this long before it exits: its peers' calls
// time out at about the same moment, and a launcher takes the whole job down
// as soon as one rank exits, so this lets every rank print its own report
// and dump.
constexpr auto kFailureLinger = std::chrono::seconds(2);

// What the failure hook needs, set once in run().
const Options* failing_options = nullptr;
std::vector<Comm>* failing_comms = nullptr;
int failing_rank = -1;
std::string launch_environment;

// The settings a replay needs besides the options: the engine's and UCX's,
// read before init (the engine sets defaults of its own for UCX there).
// Secrets stay out of the log (rr-run's RR_AUTH_TOKEN is made per job; a
// replay gets its own).
std::string engine_environment() {
  std::string out;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("RR_", 0) != 0 && name.rfind("UCX_", 0) != 0) continue;
    if (name.find("TOKEN") != std::string::npos || name.find("SECRET") != std::string::npos) continue;
    out += (out.empty() ? "" : " ") + entry;
  }
  return out.empty() ? "none" : out;
}

// One line a person can act on (the seed, the call, how to draw the same
// calls again), then this rank's view of every communicator it holds.
void report_failure(const std::string& /*message*/, const Call* call) {
  const Options& o = *failing_options;
  std::string where = "outside a drawn call (setup, control or sample)";
  if (call) {
    where = "call " + std::to_string(call->index) + " (" + kind_name(call->kind);
    if (!is_point_to_point(call->kind) && call->kind != Kind::kSplit) where += call->async ? " Async" : " blocking";
    where += std::string(" on '") + comm_name(call->comm) + "', " + std::to_string(call->bytes) + " bytes)";
  }
  std::fprintf(stderr, "soak: FAILED: rank %d, seed %" PRIu64 ", %s; replay: soak_rank %s (environment: %s)\n",
               failing_rank, o.seed, where.c_str(), replay_options(o).c_str(), launch_environment.c_str());
  std::fflush(stderr);
  for (int c = 0; c < static_cast<int>(failing_comms->size()); ++c) {
    const rrComm_t handle = (*failing_comms)[static_cast<size_t>(c)].handle;
    if (!handle) continue;  // the churned one between its destroy and its split
    std::fprintf(stderr, "soak: rank %d: communicator '%s':\n", failing_rank, comm_name(c));
    std::fflush(stderr);
    rrCommDump(handle);
  }
  std::fflush(stderr);
  std::this_thread::sleep_for(kFailureLinger);
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
std::string growth(const Sample& base, const Sample& end, const Options& o, int rank,
                   const Inventory* base_inventory = nullptr, const Inventory* end_inventory = nullptr) {
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
  // Whose they are, on the rank that holds them: the engine's (memfd slot
  // rings and boards, sockets, eventfds) or UCX's (its shared-memory pools
  // grow to the most messages ever in flight at once, and keep that).
  if (end.fds > base.fds && base_inventory && end_inventory) {
    out += who + "  new fds: " + added(base_inventory->fds, end_inventory->fds) + "\n";
    out += who + "  gone since: " + added(end_inventory->fds, base_inventory->fds) + "\n";
  }
  flat("threads", base.threads, end.threads);
  flat("mapped shared-memory segments", base.shm_mapped, end.shm_mapped);
  if (end.shm_mapped > base.shm_mapped && base_inventory && end_inventory) {
    out += who + "  new segments: " + added(base_inventory->segments, end_inventory->segments) + "\n";
    out += who + "  gone since: " + added(end_inventory->segments, base_inventory->segments) + "\n";
  }
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
  launch_environment = engine_environment();
  std::vector<Comm> comms(kNumComms);
  rrResult_t r = rrCommInitFromEnv(&comms[kWorld].handle);
  if (r != rrSuccess) die(std::string("rrCommInitFromEnv failed: ") + rrGetErrorString(r) + ": " + rrGetLastError(nullptr));
  int rank = 0, nranks = 1;
  check(rrCommUserRank(comms[kWorld].handle, &rank), "rrCommUserRank", comms[kWorld].handle);
  check(rrCommCount(comms[kWorld].handle, &nranks), "rrCommCount", comms[kWorld].handle);
  rrComm_t world = comms[kWorld].handle;
  failing_options = &o, failing_comms = &comms, failing_rank = rank;
  set_failure_hook(report_failure);
  // Split communicators take the engine's settings, or with --random-shapes
  // a drawn chunk size and depth each.
  std::vector<Shape> shapes(kNumComms);
  auto split = [&](int comm, int color, int key) {
    shapes[static_cast<size_t>(comm)] = draw_shape(o.seed, comm, 0, nranks);
    const rrConfig_t config = shapes[static_cast<size_t>(comm)].config(rank);
    check(rrCommSplit(world, color, key, &comms[static_cast<size_t>(comm)].handle, o.random_shapes ? &config : nullptr),
          (std::string("rrCommSplit (") + comm_name(comm) + ")").c_str(), world);
  };
  split(kDup, 0, rank);
  split(kHalf, 2 * rank < nranks ? 0 : 1, rank);
  split(kReversed, 0, nranks - 1 - rank);
  for (Comm& c : comms) learn_members(&c, rank);
  if (rank == 0 && (o.random_shapes || o.threads || o.idle_max_ms > 0)) {
    std::printf("soak: fuzzer: seed %" PRIu64 ", idle pauses %s, communicators driven from %s\n", o.seed,
                o.idle_max_ms > 0 ? ("of 0.." + std::to_string(std::lround(o.idle_max_ms)) + " ms after " +
                                     std::to_string(std::lround(100 * o.idle_chance)) + "% of batches").c_str()
                                  : "off",
                o.threads ? "one thread each" : "this thread");
    for (int c = kDup; c < kNumComms && o.random_shapes; ++c) {
      std::printf("soak: communicator '%s' shape: %s\n", comm_name(c),
                  shapes[static_cast<size_t>(c)].describe(comms[static_cast<size_t>(c)].members).c_str());
    }
    std::fflush(stdout);
  }

  std::vector<Slot> slots = make_slots(o);
  PlanOptions plan;
  plan.seed = o.seed;
  plan.max_bytes = o.max_bytes;
  for (const Slot& s : slots) plan.slot_bytes.push_back(s.bytes);
  Planner planner(plan);
  Runner runner(o.seed, rank, nranks, &comms, &slots);
  runner.corrupt_reference_of(o.corrupt_call);
  if (o.random_shapes) runner.use_random_shapes();
  if (o.threads) runner.use_threads();
  // Pauses are this rank's own (the plan is everyone's): a rank idling
  // while its peers go on is what leaves bytes it was to send unsent.
  Rng idle(mix(o.seed ^ 0x49444c45ull) + static_cast<uint64_t>(rank));

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
  Inventory warm_inventory;
  double last_sample = 0;
  for (uint64_t batches = 1;; ++batches) {
    runner.run(planner.next());
    if (o.idle_max_ms > 0 && idle.chance(o.idle_chance)) {
      std::this_thread::sleep_for(std::chrono::microseconds(std::llround(idle.unit() * o.idle_max_ms * 1000)));
    }
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
      warm_inventory = take_inventory();
      warm_sample = samples.size() - 1;
      report.warm_t = samples.back().t;
      report.at_warm = runner.stats();
    }
    if (control[0]) break;
  }
  report.end_t = samples.back().t;
  report.at_end = runner.stats();

  // Every rank's verdict, then every rank's samples on rank 0 (for --json).
  const Inventory end_inventory = take_inventory();
  const std::string grew = growth(samples[warm_sample], samples.back(), o, rank, &warm_inventory, &end_inventory);
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

int main(int argc, char** argv) { return soak::run(soak::parse_options(argc, argv)); }
