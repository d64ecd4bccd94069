// shrink_fuzz_rank: the fuzzer's kill-and-shrink mode (tests/soak/fuzz-hosts
// --kill-shrink). One env:// rank (RANK, WORLD_SIZE) of a job that runs
// generations for --seconds: in each, this process forks a worker that
// joins the generation's communicator (a file:// rendezvous in --dir, one
// file per generation), and the workers loop over collectives drawn from
// the seed (allreduce, broadcast, all-gather, reduce-scatter, all-to-all,
// barrier; int64 sums, counts from 0 to 70,000, in place or not), each
// result checked exactly. The generation's plan (the same on every rank)
// kills 0 to 2 of its ranks, each at the first step it reaches from a drawn
// one (SIGKILL, by itself, between calls: its peers may be anywhere in
// theirs); the survivors' calls fail, each revokes and calls
// rrCommShrinkFailed: every rank they agree on must be a planned victim
// (nobody alive is excluded), all must agree on the same set, and the loop
// goes on in the new communicator (in the old order) from the latest step
// any survivor reached, checked against the survivors' reference. A worker that hangs past --generation-seconds is a failure
// (the engine's timeout, RR_TIMEOUT_MS, should have ended it); so is any
// error but the victims' deaths. After each generation the new rank 0
// writes whether another fits in --seconds; every rank reads it.
//
//   shrink_fuzz_rank --dir DIR [--seconds S] [--seed N] [--steps K]
//                    [--generation-seconds G] [--idle-max-ms M --idle-chance P]
//   (read through CLI11, tools/common/command_line.hpp, as the other tools)
//
// With --idle-max-ms, each rank pauses 0..M ms after a share P of its steps
// (drawn per rank), as the soak fuzzer's ranks do: ranks then wait on each
// other at every moment of a call, and share the cores as a job's would
// rather than all spinning on them at once.
//
// Exit status: 0 passed, 1 a wrong result, an engine error, a wrong agreed
// set or a hang (the first lines say which, with the seed and generation).

#include <ringreduce/ringreduce.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "command_line.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  double seconds = 60;
  uint64_t seed = 1;
  std::string dir;
  int steps = 120;
  double generation_seconds = 120;
  double idle_max_ms = 0;     // after a step, sometimes sleep 0..this (drawn per rank)
  double idle_chance = 0.25;  // how often
};

constexpr const char kUsage[] =
    "usage: shrink_fuzz_rank --dir DIR [options] (RANK and WORLD_SIZE in the environment: env://)\n"
    "  --dir DIR                  one file:// rendezvous per generation, and the verdicts (required)\n"
    "  --seconds S                generations for S seconds (default 60)\n"
    "  --seed N                   the plan: victims, steps, calls (default 1)\n"
    "  --steps K                  steps of a generation (default 120)\n"
    "  --generation-seconds G     a worker still running after G seconds is a hang (default 120)\n"
    "  --idle-max-ms M            after a share --idle-chance of its steps, a rank pauses 0..M ms (default 0)\n"
    "  --idle-chance P            (default 0.25)\n"
    "exit status: 0 passed; 1 a wrong result, an engine error, a wrong agreed set or a hang; 2 usage\n";

Options parse_options(int argc, char** argv) {
  Options o;
  std::string seconds, seed, steps, generation_seconds, idle_max, idle_chance;
  rr::tools::CommandLine command_line("shrink_fuzz_rank");
  CLI::App& app = command_line.app;
  app.add_option("--seconds", seconds);
  app.add_option("--seed", seed);
  app.add_option("--dir", o.dir);
  app.add_option("--steps", steps);
  app.add_option("--generation-seconds", generation_seconds);
  app.add_option("--idle-max-ms", idle_max);
  app.add_option("--idle-chance", idle_chance);
  command_line.parse_or_exit(argc, argv, kUsage);
  const auto given = [&](const char* flag) { return command_line.given(flag); };
  if (given("--seconds")) o.seconds = command_line.number("--seconds", seconds);
  if (given("--seed")) o.seed = command_line.whole("--seed", seed);
  if (given("--steps")) o.steps = static_cast<int>(command_line.whole("--steps", steps, 1, 1000000));
  if (given("--generation-seconds")) {
    o.generation_seconds = command_line.number("--generation-seconds", generation_seconds);
  }
  if (given("--idle-max-ms")) o.idle_max_ms = command_line.number("--idle-max-ms", idle_max);
  if (given("--idle-chance")) o.idle_chance = command_line.number("--idle-chance", idle_chance);
  if (o.idle_chance > 1) command_line.exit_usage("--idle-chance takes 0 to 1, not '" + idle_chance + "'");
  if (o.dir.empty()) command_line.exit_usage("--dir DIR is required");
  if (!std::getenv("RANK") || !std::getenv("WORLD_SIZE")) {
    command_line.exit_usage("RANK and WORLD_SIZE must be set (env://)");
  }
  return o;
}

// A generation's plan, the same on every rank: who dies at which step.
struct Plan {
  std::vector<int> victims;     // world ranks
  std::vector<int> kill_steps;  // the step each dies at
};

Plan plan_of(uint64_t seed, int generation, int n) {
  std::mt19937_64 random(seed * 1000003u + static_cast<uint64_t>(generation));
  Plan plan;
  const int kills = n <= 2 ? static_cast<int>(random() % 2) : static_cast<int>(random() % 3);  // 0..2, one survivor at least
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
  std::shuffle(ranks.begin(), ranks.end(), random);
  for (int k = 0; k < kills && k < n - 1; ++k) {
    plan.victims.push_back(ranks[static_cast<size_t>(k)]);
    // Sometimes both at once (the same step), sometimes apart.
    const int step = k == 1 && random() % 3 == 0 ? plan.kill_steps[0] : 3 + static_cast<int>(random() % 60);
    plan.kill_steps.push_back(step);
  }
  return plan;
}

// A file in --dir that a failing rank makes, so that the others stop
// waiting for a verdict no one will write (and end the job at once).
std::string failed_marker;

[[noreturn]] void fail(int rank, int generation, int step, const std::string& what) {
  std::fprintf(stderr, "shrink_fuzz: FAILED: rank %d, generation %d, step %d: %s\n", rank, generation, step, what.c_str());
  std::fflush(stderr);
  if (!failed_marker.empty()) std::ofstream(failed_marker) << rank << "\n";
  _exit(1);
}

// For a call that failed with nobody due to die (a stall the timeout
// ended): this process's TCP sockets as the kernel holds them now, before
// any rank exits, so that a message that never arrived shows where it is
// (in the sender's Send-Q, the receiver's Recv-Q, or neither: inside UCX).
void print_own_sockets(int rank) {
  FILE* ss = popen("ss -tnpH 2>/dev/null", "r");
  if (!ss) return;
  const std::string mine = "pid=" + std::to_string(getpid()) + ",";
  char line[1024];
  while (std::fgets(line, sizeof(line), ss)) {
    if (std::strstr(line, mine.c_str())) std::fprintf(stderr, "shrink_fuzz: rank %d socket: %s", rank, line);
  }
  (void)pclose(ss);
  std::fflush(stderr);
}

// Value of element k for world rank r at step s (small: sums stay exact).
int64_t value(int r, int s, size_t k) { return (r + 1) * 1000 + static_cast<int64_t>((k * 7 + static_cast<size_t>(s)) % 997); }

// One drawn collective on `comm` (whose ranks are the world ranks `members`,
// this one `me`): runs it and checks it. rrSuccess, or the call's result.
rrResult_t one_step(rrComm_t comm, const std::vector<int>& members, int me, int step, std::mt19937_64& random,
                    int generation) {
  // (A failed call's buffers may hold anything: only a success is checked.)
  const int n = static_cast<int>(members.size());
  const int rank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  const int kind = static_cast<int>(random() % 6);
  const size_t counts[] = {0, 1, 7, 1000, 4099, 70001};
  const size_t count = counts[random() % 6];
  const bool in_place = random() % 2 == 0;
  const int root = static_cast<int>(random() % static_cast<uint64_t>(n));
  std::vector<int64_t> send, recv;
  auto expect = [&](size_t at, int64_t want, const char* name) {
    if (recv[at] != want) {
      fail(me, generation, step,
           std::string(name) + ": element " + std::to_string(at) + " is " + std::to_string(recv[at]) + ", expected " +
               std::to_string(want) + " (count " + std::to_string(count) + ", " + std::to_string(n) + " ranks)");
    }
  };
  rrResult_t r = rrSuccess;
  switch (kind) {
    case 0: {  // allreduce
      recv.resize(count);
      for (size_t k = 0; k < count; ++k) recv[k] = value(me, step, k);
      send = recv;
      r = rrAllReduce(in_place ? recv.data() : send.data(), recv.data(), count, rrInt64, rrSum, comm, nullptr);
      for (size_t k = 0; k < count && r == rrSuccess; ++k) {
        int64_t want = 0;
        for (int m : members) want += value(m, step, k);
        expect(k, want, "allreduce");
      }
      break;
    }
    case 1: {  // broadcast
      recv.assign(count, -1);
      if (rank == root) for (size_t k = 0; k < count; ++k) recv[k] = value(me, step, k);
      r = rrBroadcast(recv.data(), recv.data(), count, rrInt64, root, comm, nullptr);
      for (size_t k = 0; k < count && r == rrSuccess; ++k) expect(k, value(members[static_cast<size_t>(root)], step, k), "broadcast");
      break;
    }
    case 2: {  // all-gather
      send.resize(count);
      for (size_t k = 0; k < count; ++k) send[k] = value(me, step, k);
      recv.assign(count * static_cast<size_t>(n), -1);
      r = rrAllGather(send.data(), recv.data(), count, rrInt64, comm, nullptr);
      for (int q = 0; q < n && r == rrSuccess; ++q) {
        for (size_t k = 0; k < count; ++k) expect(static_cast<size_t>(q) * count + k, value(members[static_cast<size_t>(q)], step, k), "all-gather");
      }
      break;
    }
    case 3: {  // reduce-scatter
      send.resize(count * static_cast<size_t>(n));
      for (size_t k = 0; k < send.size(); ++k) send[k] = value(me, step, k);
      recv.assign(count, -1);
      r = rrReduceScatter(send.data(), recv.data(), count, rrInt64, rrSum, comm, nullptr);
      for (size_t k = 0; k < count && r == rrSuccess; ++k) {
        int64_t want = 0;
        for (int m : members) want += value(m, step, static_cast<size_t>(rank) * count + k);
        expect(k, want, "reduce-scatter");
      }
      break;
    }
    case 4: {  // all-to-all: block q of rank p's send goes to rank q
      send.resize(count * static_cast<size_t>(n));
      for (size_t k = 0; k < send.size(); ++k) send[k] = value(me, step, k);
      recv.assign(send.size(), -1);
      r = rrAllToAll(send.data(), recv.data(), count, rrInt64, comm, nullptr);
      for (int q = 0; q < n && r == rrSuccess; ++q) {
        for (size_t k = 0; k < count; ++k) {
          expect(static_cast<size_t>(q) * count + k, value(members[static_cast<size_t>(q)], step, static_cast<size_t>(rank) * count + k),
                 "all-to-all");
        }
      }
      break;
    }
    default:
      r = rrBarrier(comm, nullptr);
  }
  return r;
}

// The worker of one generation: joins, loops, kills or shrinks, checks.
int worker(const Options& o, int generation, int me, int n) {
  const Plan plan = plan_of(o.seed, generation, n);
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  rrComm_t comm = nullptr;
  const std::string url = "file://" + o.dir + "/generation-" + std::to_string(generation);
  if (rrCommInitUrl(&comm, url.c_str(), n, me, &config) != rrSuccess) {
    fail(me, generation, -1, std::string("init: ") + rrGetLastError(nullptr));
  }
  std::vector<int> members(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) members[static_cast<size_t>(r)] = r;
  std::vector<int> dead;  // world ranks agreed dead
  std::mt19937_64 idle(o.seed * 31u + static_cast<uint64_t>(generation) * 977u + static_cast<uint64_t>(me));
  for (int step = 0; step < o.steps; ++step) {
    if (o.idle_max_ms > 0 && std::uniform_real_distribution<double>(0, 1)(idle) < o.idle_chance) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(
          std::uniform_real_distribution<double>(0, o.idle_max_ms)(idle)));
    }
    for (size_t v = 0; v < plan.victims.size(); ++v) {
      if (plan.victims[v] == me && step >= plan.kill_steps[v]) raise(SIGKILL);
    }
    // Every rank draws step `step`'s call alike.
    std::mt19937_64 step_random(o.seed * 7919u + static_cast<uint64_t>(generation) * 104729u + static_cast<uint64_t>(step));
    const rrResult_t r = one_step(comm, members, me, step, step_random, generation);
    if (r == rrSuccess) continue;
    // The call failed: a planned victim of this generation must have died,
    // at whatever step it had reached. A victim may be several steps ahead
    // of a rank still waiting for what it sent: its sends completed once
    // UCX's TCP lane had copied them (below the zero-copy size), it went on
    // to the calls that needed nothing from the waiting rank, and the bytes
    // still in its process died with it at its kill step (seen 3 steps
    // ahead, four times in about four fuzz hours, reported as UCX's
    // "Endpoint timeout"). Still sound: a call that failed with nobody dead
    // leaves the survivors agreeing on nobody, or on a rank that was not a
    // victim, and both fail below.
    bool any = false;
    for (size_t v = 0; v < plan.victims.size(); ++v) {
      any |= std::find(dead.begin(), dead.end(), plan.victims[v]) == dead.end();
    }
    if (!any) {
      const std::string error = rrGetLastError(comm);
      print_own_sockets(me);
      fail(me, generation, step, "a call failed with no victim due: " + error);
    }
    (void)rrCommRevoke(comm);
    std::vector<int> excluded(members.size(), -1);
    int count = 0;
    rrComm_t next = nullptr;
    if (rrCommShrinkFailed(comm, &next, excluded.data(), &count, nullptr) != rrSuccess) {
      fail(me, generation, step, std::string("rrCommShrinkFailed: ") + rrGetLastError(comm));
    }
    std::vector<int> agreed;  // in world ranks
    for (int i = 0; i < count; ++i) agreed.push_back(members[static_cast<size_t>(excluded[static_cast<size_t>(i)])]);
    std::string text;
    for (int x : agreed) text += " " + std::to_string(x);
    // Nobody alive is ever excluded: every agreed rank is a planned victim.
    for (int x : agreed) {
      if (std::find(plan.victims.begin(), plan.victims.end(), x) == plan.victims.end()) {
        fail(me, generation, step, "agreed on {" + text + " } failed: rank " + std::to_string(x) + " was alive");
      }
    }
    if (agreed.empty()) fail(me, generation, step, "agreed that nobody failed, after a call failed");
    std::vector<int> left;
    for (int m : members) {
      if (std::find(agreed.begin(), agreed.end(), m) == agreed.end()) left.push_back(m);
    }
    members = left;
    dead.insert(dead.end(), agreed.begin(), agreed.end());
    (void)rrCommDestroy(comm);
    comm = next;
    // Every survivor agreed on the same set (a checksum, min and max), and
    // they go on from the latest step any of them reached.
    int64_t mine[3] = {0, static_cast<int64_t>(agreed.size()), step};
    for (int x : agreed) mine[0] = mine[0] * 131 + x;
    int64_t low[3], high[3];
    if (rrAllReduce(mine, low, 3, rrInt64, rrMin, comm, nullptr) != rrSuccess ||
        rrAllReduce(mine, high, 3, rrInt64, rrMax, comm, nullptr) != rrSuccess) {
      fail(me, generation, step, std::string("after the shrink: ") + rrGetLastError(comm));
    }
    if (low[0] != high[0] || low[1] != high[1]) fail(me, generation, step, "the survivors agreed on different sets: this one {" + text + " }");
    step = static_cast<int>(high[2]);
  }
  // Whether another generation fits: the new rank 0 says, in a file.
  int rank = -1;
  (void)rrCommUserRank(comm, &rank);
  if (rrBarrier(comm, nullptr) != rrSuccess) fail(me, generation, o.steps, std::string("last barrier: ") + rrGetLastError(comm));
  (void)rrCommDestroy(comm);
  return rank;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  failed_marker = o.dir + "/failed";
  const int me = std::atoi(std::getenv("RANK")), n = std::atoi(std::getenv("WORLD_SIZE"));  // parse_options checked both
  const auto start = Clock::now();
  int generations = 0, deaths = 0;
  for (int generation = 0;; ++generation) {
    const std::string verdict = o.dir + "/generation-" + std::to_string(generation) + ".next";
    const pid_t pid = fork();
    if (pid < 0) fail(me, generation, -1, "fork failed");
    if (pid == 0) {
      const int rank = worker(o, generation, me, n);
      if (rank == 0) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string tmp = verdict + ".tmp";
        std::ofstream(tmp) << (elapsed + 3 < o.seconds ? "more" : "done");
        std::rename(tmp.c_str(), verdict.c_str());
      }
      _exit(0);
    }
    // Wait for the worker, at most --generation-seconds.
    const auto limit = Clock::now() + std::chrono::duration<double>(o.generation_seconds);
    int status = 0;
    for (;;) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      if (Clock::now() > limit) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail(me, generation, -1, "the worker hung past --generation-seconds (the engine's timeout did not end it)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const Plan plan = plan_of(o.seed, generation, n);
    const bool victim = std::find(plan.victims.begin(), plan.victims.end(), me) != plan.victims.end();
    if (victim ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) : !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 1) return 1;  // it said why
      fail(me, generation, -1, "the worker ended with status " + std::to_string(status));
    }
    ++generations;
    deaths += static_cast<int>(plan.victims.size());
    // The verdict: written by the generation's last rank 0 (a survivor).
    std::string word;
    while (word.empty()) {
      std::ifstream(verdict) >> word;
      if (!word.empty()) break;
      if (std::ifstream(failed_marker)) return 1;  // another rank failed, and said why
      if (Clock::now() > limit) fail(me, generation, -1, "no verdict from the generation's rank 0");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (word != "more") break;
  }
  if (me == 0) {
    std::printf("shrink_fuzz: passed: %d generations, %d planned deaths, every survivor's agreed set right\n",
                generations, deaths);
  }
  return 0;
}
