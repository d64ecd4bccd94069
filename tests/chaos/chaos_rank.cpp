// One rank of the chaos harness (chaos.py): a short training-job-like life
// through the public C API only, in five phases, while one rank of the job
// (the victim) strikes itself at a moment it is told.
//
//   init        rrCommInitFromEnv (env://: MASTER_ADDR, MASTER_PORT, RANK,
//               WORLD_SIZE; RR_TIMEOUT_MS bounds every call)
//   split       rrCommSplit of the world (colors by rank parity; with five
//               ranks the last opts out with RR_SPLIT_NOCOLOR)
//   collective  rounds of: allreduce 16 MiB and 1 KiB, broadcast and reduce
//               of 4 KiB (binomial trees on 3+ ranks) and of 1 MiB (chains),
//               allgather, an allreduce on the sub-communicator, barrier
//   p2p         4 x rounds of a ring shift: rrIsend/rrIrecv + rrWait of
//               1 MiB, then rrGroupStart/rrSend/rrRecv/rrGroupEnd of 4 KiB
//   destroy     rrCommDestroy of the sub-communicator, then of the world
//
// Every result is checked against what it must hold. The first failed call
// ends the work: the rank aborts what it still holds and reports.
//
// The victim's strike thread waits until the main thread enters the chosen
// phase, sleeps the given delay, then strikes:
//   kill    SIGKILL to itself
//   stop    SIGSTOP to itself (chaos.py resumes or kills it later)
//   abort   rrCommAbort of the communicator the main thread is inside a call
//           on, once that call has run 10 ms (so the thread is surely in the
//           library). No handle exists before init returns, and aborting a
//           communicator while it is being destroyed is a use after free, so
//           the abort waits for the main thread to be inside a call that may
//           be aborted; at the destroy phase the victim hands its world
//           communicator to the strike thread instead of destroying it.
//   socket  shutdown(SHUT_RDWR) on every connected TCP socket of the
//           process (listed in /proc/self/fd; listening ones are left), not close: a closed descriptor number could be
//           reused by the engine at once, and shutdown breaks the connection
//           while the descriptor stays valid. Ranks on one host reach each
//           other through UCX's shared memory unless UCX_TLS says otherwise,
//           so the harness runs this kind with UCX_TLS=tcp.
// A strike always happens: a main thread that finishes first waits for it.
//
// Output, one line each on stdout, each written at once by one write():
//   CHAOS {"event":"strike","rank":R,"kind":...,"phase":...,"call":...,"t":T,...}
//       before a kill or stop, after an abort or shutdown; T is
//       CLOCK_MONOTONIC seconds, the clock chaos.py's time.monotonic() reads
//   CHAOS {"event":"outcome","rank":R,"result":"ok"|"rrTimeout"|...,
//          "phase":...,"call":...,"call_start":T0,"t":T1,"seconds":T1-T0,
//          "error":"<rrGetLastError>",...}
//       at exit; on failure, call_start is the start of the failing call.
// Exit status: 0 every call succeeded, 1 a call failed, 3 a call succeeded
// with a wrong result, 2 bad usage.
//
// usage: chaos_rank [--rounds N] [--victim R --kind KIND --moment PHASE --delay-ms MS]
#include <ringreduce/ringreduce.h>
#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "command_line.hpp"

namespace {

enum class Phase { kInit, kSplit, kCollective, kP2p, kDestroy, kDone };
constexpr const char* kPhaseNames[] = {"init", "split", "collective", "p2p", "destroy", "done"};
const char* phase_name(Phase p) { return kPhaseNames[static_cast<int>(p)]; }

enum class Kind { kKill, kStop, kAbort, kSocket };
constexpr const char* kKindNames[] = {"kill", "stop", "abort", "socket"};

double monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

const char* result_name(rrResult_t r) {
  switch (r) {
    case rrSuccess: return "ok";
    case rrUnhandledCudaError: return "rrUnhandledCudaError";
    case rrSystemError: return "rrSystemError";
    case rrInternalError: return "rrInternalError";
    case rrInvalidArgument: return "rrInvalidArgument";
    case rrInvalidUsage: return "rrInvalidUsage";
    case rrRemoteError: return "rrRemoteError";
    case rrInProgress: return "rrInProgress";
    case rrTimeout: return "rrTimeout";
    default: return "unknown";
  }
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One line, one write(): lines of ranks sharing a pipe never interleave, and
// a line written before SIGKILL is out of the process already.
void emit(const std::string& json) {
  const std::string line = "CHAOS " + json + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = write(STDOUT_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Every connected TCP socket of this process.
std::vector<int> connected_tcp_sockets() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  const int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    int domain = 0, type = 0, protocol = 0;
    socklen_t len = sizeof(int);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) continue;  // not a socket
    len = sizeof(int);
    getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len);
    len = sizeof(int);
    getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PROTOCOL, &protocol, &len);
    if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM || protocol != IPPROTO_TCP) continue;
    // Connections only: a fault breaks connections, not a listening socket
    // (shut down, UCX 1.13's TCP listener logs accept() errors and, when
    // its interface closes, fails an assertion, tcp_iface.c:369).
    int listening = 0;
    len = sizeof(int);
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening) continue;
    fds.push_back(static_cast<int>(fd));
  }
  closedir(dir);
  return fds;
}

// Whose part a call cannot finish without, for the harness's check that a
// rank which finished did not need the victim after its strike. Only
// certain needs: the data this rank receives passed through that peer
// (allreduce, allgather, barrier, split and init need every rank; a receive
// needs its sender). Broadcast and reduce are left out: a root or a leaf may
// finish by sending alone. `offset`: the needed step is the peer's step this
// step + offset (a receive waits for the peer's isend, posted two calls
// earlier in the common schedule).
struct Need {
  enum Who { kNone, kAll, kSub, kLeft } who = kNone;
  int offset = 0;
};

// How long a call must have run before the abort strike may end it.
constexpr double kSettle = 0.010;

struct Strike {
  bool armed = false;
  Kind kind = Kind::kKill;
  Phase moment = Phase::kInit;
  int delay_ms = 0;
};

// What the main thread is doing, as the strike thread sees it. Guarded by
// mutex: the abort strike holds it through rrCommAbort, so the main thread,
// once back from a call, learns of the abort before it touches the handle.
struct World {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<int> phase{static_cast<int>(Phase::kInit)};
  std::string call = "start";
  int step = -1;               // the common schedule's step of the running or last call
  bool in_call = false;
  rrComm_t inside = nullptr;   // the communicator of the running call that may be aborted
  uint64_t calls = 0;          // calls begun: tells one call from the next
  double inside_since = 0;     // when the running call began
  rrComm_t handoff = nullptr;  // the victim's world at destroy: the strike aborts it
  rrComm_t aborted = nullptr;  // what the strike aborted: never touched again
  bool finished = false;       // the main thread will make no more calls
  bool struck = false;
};

class Rank {
 public:
  Rank(int rank, int size, int rounds, const Strike& strike)
      : rank_(rank), size_(size), rounds_(rounds), strike_(strike), needed_(static_cast<size_t>(size), -1) {}

  int run();

 private:
  template <class F>
  rrResult_t call(const char* name, rrComm_t abortable, Need need, F&& f);
  void skip_step() { ++step_; }
  void enter(Phase p);
  bool work();
  bool check(bool ok, const char* what);
  void strike_thread();
  void cleanup();
  std::string common_fields() const;
  // split: parity colors; with 5 ranks rank 4 stays out; on 2 ranks one
  // group (in reverse order, by key).
  int color_of(int r) const { return size_ == 2 ? 0 : (size_ == 5 && r == 4 ? RR_SPLIT_NOCOLOR : r % 2); }

  const int rank_;
  const int size_;
  const int rounds_;
  const Strike strike_;
  World w_;

  rrComm_t world_ = nullptr;
  rrComm_t sub_ = nullptr;
  std::vector<rrRequest_t> pending_;
  std::vector<float> p2p_out_, p2p_in_;  // the requests' buffers
  int step_ = 0;              // every rank numbers the calls of the schedule alike
  int color_ = RR_SPLIT_NOCOLOR;
  std::vector<int> needed_;   // [peer] the last step of that peer a finished call needed, -1 none
  double entered_[6] = {};  // when each phase began (CLOCK_MONOTONIC), 0: never

  rrResult_t result_ = rrSuccess;
  bool wrong_ = false;
  bool stopped_by_abort_ = false;  // the abort strike ended the work after a call succeeded
  std::string failed_call_;
  Phase failed_phase_ = Phase::kDone;
  double call_start_ = 0, call_end_ = 0;
  std::string error_;
};

std::string Rank::common_fields() const {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "\"rank\":%d,\"size\":%d,\"pid\":%d", rank_, size_, static_cast<int>(getpid()));
  return buf;
}

void Rank::enter(Phase p) {
  entered_[static_cast<int>(p)] = monotonic_now();
  std::lock_guard<std::mutex> lock(w_.mutex);
  w_.phase = static_cast<int>(p);
  w_.changed.notify_all();
}

// Runs one call; `abortable` is the communicator the abort strike may end
// while the call runs (nullptr: none, e.g. init, or a destroy).
template <class F>
rrResult_t Rank::call(const char* name, rrComm_t abortable, Need need, F&& f) {
  const int step = step_++;
  {
    std::lock_guard<std::mutex> lock(w_.mutex);
    w_.call = name;
    w_.step = step;
    w_.in_call = true;
    w_.inside = abortable;
    w_.inside_since = monotonic_now();
    ++w_.calls;
    w_.changed.notify_all();
  }
  const double start = monotonic_now();
  rrResult_t r = f();
  const double end = monotonic_now();
  std::lock_guard<std::mutex> lock(w_.mutex);
  w_.inside = nullptr;
  w_.in_call = false;
  if (r == rrSuccess && need.who != Need::kNone) {
    for (int peer = 0; peer < size_; ++peer) {
      const bool needed = peer != rank_ && (need.who == Need::kAll ||
                                            (need.who == Need::kSub && color_ >= 0 && color_of(peer) == color_) ||
                                            (need.who == Need::kLeft && peer == (rank_ + size_ - 1) % size_));
      if (needed) needed_[static_cast<size_t>(peer)] = std::max(needed_[static_cast<size_t>(peer)], step + need.offset);
    }
  }
  if (r == rrSuccess && w_.aborted) {
    // The call finished before the abort took hold: the communicator is
    // gone all the same, so the work ends here, successfully.
    stopped_by_abort_ = true;
    failed_call_ = name;
    failed_phase_ = static_cast<Phase>(w_.phase.load());
    return rrInProgress;
  }
  if (r != rrSuccess) {
    result_ = r;
    failed_call_ = name;
    failed_phase_ = static_cast<Phase>(w_.phase.load());
    call_start_ = start;
    call_end_ = end;
    // This thread's copy: the communicator may have been aborted (freed).
    error_ = rrGetLastError(nullptr);
  }
  return r;
}

bool Rank::check(bool ok, const char* what) {
  if (ok) return true;
  wrong_ = true;
  failed_call_ = what;
  failed_phase_ = static_cast<Phase>(w_.phase.load());
  call_start_ = call_end_ = monotonic_now();
  error_ = std::string("wrong result of ") + what;
  return false;
}

bool Rank::work() {
  const int n = size_;
  // init
  enter(Phase::kInit);
  if (call("init", nullptr, Need{Need::kAll}, [&] { return rrCommInitFromEnv(&world_); }) != rrSuccess) return false;

  enter(Phase::kSplit);
  const int color = color_ = color_of(rank_);
  const int key = n == 2 ? -rank_ : rank_;
  if (call("split", world_, Need{Need::kAll}, [&] { return rrCommSplit(world_, color, key, &sub_, nullptr); }) != rrSuccess) {
    return false;
  }
  int sub_size = 0;
  if (sub_ && rrCommCount(sub_, &sub_size) != rrSuccess) return check(false, "rrCommCount(sub)");
  if (!check((color < 0) == (sub_ == nullptr), "split membership")) return false;

  // collective
  enter(Phase::kCollective);
  const float me = static_cast<float>(rank_ + 1);
  const float sum = static_cast<float>(n * (n + 1) / 2);
  std::vector<float> large(size_t{4} << 20), small(256), tree(1024), chain(size_t{256} << 10);
  std::vector<int32_t> gathered(static_cast<size_t>(n) * 1024);
  for (int round = 0; round < rounds_; ++round) {
    std::fill(large.begin(), large.end(), me);
    if (call("allreduce-16MiB", world_, Need{Need::kAll},
             [&] { return rrAllReduce(large.data(), large.data(), large.size(), rrFloat32, rrSum, world_, nullptr); }) !=
        rrSuccess) {
      return false;
    }
    if (!check(large.front() == sum && large.back() == sum, "allreduce-16MiB")) return false;
    std::fill(small.begin(), small.end(), me);
    if (call("allreduce-1KiB", world_, Need{Need::kAll},
             [&] { return rrAllReduce(small.data(), small.data(), small.size(), rrFloat32, rrMax, world_, nullptr); }) !=
        rrSuccess) {
      return false;
    }
    if (!check(small.front() == static_cast<float>(n), "allreduce-1KiB")) return false;
    const int root = round % n;
    std::fill(tree.begin(), tree.end(), me);
    if (call("broadcast-4KiB", world_, Need{},
             [&] { return rrBroadcast(tree.data(), tree.data(), tree.size(), rrFloat32, root, world_, nullptr); }) !=
        rrSuccess) {
      return false;
    }
    if (!check(tree.back() == static_cast<float>(root + 1), "broadcast-4KiB")) return false;
    std::fill(tree.begin(), tree.end(), me);
    const int reduce_root = (round + 1) % n;
    if (call("reduce-4KiB", world_, Need{}, [&] {
          return rrReduce(tree.data(), tree.data(), tree.size(), rrFloat32, rrSum, reduce_root, world_, nullptr);
        }) != rrSuccess) {
      return false;
    }
    if (rank_ == reduce_root && !check(tree.back() == sum, "reduce-4KiB")) return false;
    std::fill(chain.begin(), chain.end(), me);
    if (call("broadcast-1MiB", world_, Need{},
             [&] { return rrBroadcast(chain.data(), chain.data(), chain.size(), rrFloat32, root, world_, nullptr); }) !=
        rrSuccess) {
      return false;
    }
    if (!check(chain.back() == static_cast<float>(root + 1), "broadcast-1MiB")) return false;
    std::fill(chain.begin(), chain.end(), me);
    if (call("reduce-1MiB", world_, Need{}, [&] {
          return rrReduce(chain.data(), chain.data(), chain.size(), rrFloat32, rrSum, reduce_root, world_, nullptr);
        }) != rrSuccess) {
      return false;
    }
    if (rank_ == reduce_root && !check(chain.back() == sum, "reduce-1MiB")) return false;
    const std::vector<int32_t> mine(1024, rank_);
    if (call("allgather-4KiB", world_, Need{Need::kAll}, [&] {
          return rrAllGather(mine.data(), gathered.data(), mine.size(), rrInt32, world_, nullptr);
        }) != rrSuccess) {
      return false;
    }
    for (int r = 0; r < n; ++r) {
      if (!check(gathered[static_cast<size_t>(r) * 1024 + 1023] == r, "allgather-4KiB")) return false;
    }
    if (!sub_) skip_step();
    if (sub_) {
      std::fill(small.begin(), small.end(), 1.0f);
      if (call("sub-allreduce-1KiB", sub_, Need{Need::kSub}, [&] {
            return rrAllReduce(small.data(), small.data(), small.size(), rrFloat32, rrSum, sub_, nullptr);
          }) != rrSuccess) {
        return false;
      }
      if (!check(small.front() == static_cast<float>(sub_size), "sub-allreduce-1KiB")) return false;
    }
    if (call("barrier", world_, Need{Need::kAll}, [&] { return rrBarrier(world_, nullptr); }) != rrSuccess) return false;
  }

  // p2p: a ring shift, non-blocking then grouped.
  enter(Phase::kP2p);
  const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
  // Members, not locals: a request's buffers belong to it until rrWait
  // released it, which the cleanup after a failure does last. (A blocking
  // call's buffers are the caller's again once it returned, failed or not:
  // those are locals, freed as soon as the work ends.)
  std::vector<float>& out = p2p_out_;
  std::vector<float>& in = p2p_in_;
  out.assign(size_t{256} << 10, 0.0f);
  in.assign(out.size(), 0.0f);
  for (int round = 0; round < 4 * rounds_; ++round) {
    std::fill(out.begin(), out.end(), me + static_cast<float>(round));
    std::fill(in.begin(), in.end(), -1.0f);
    rrRequest_t send = nullptr, recv = nullptr;
    // A request made is waited for, even if the work ends right after.
    const rrResult_t posted =
        call("irecv", world_, Need{}, [&] { return rrIrecv(in.data(), in.size(), rrFloat32, left, world_, &recv); });
    if (recv) pending_.push_back(recv);
    if (posted != rrSuccess) return false;
    const rrResult_t sent =
        call("isend", world_, Need{}, [&] { return rrIsend(out.data(), out.size(), rrFloat32, right, world_, &send); });
    if (send) pending_.push_back(send);
    if (sent != rrSuccess) return false;
    // The receive needs the left neighbour's isend, two steps before it.
    for (rrRequest_t req : {send, recv}) {
      const bool receive = req == recv;
      const rrResult_t r = call(receive ? "wait-recv" : "wait-send", world_,
                                receive ? Need{Need::kLeft, -2} : Need{}, [&] { return rrWait(req); });
      // Released either way, once rrWait answered.
      pending_.erase(std::find(pending_.begin(), pending_.end(), req));
      if (r != rrSuccess) return false;
    }
    if (!check(in.back() == static_cast<float>(left + 1 + round), "isend/irecv shift")) return false;
    std::fill(in.begin(), in.end(), -1.0f);
    // Queued sends and receives reference the communicator until
    // rrGroupEnd: only rrGroupEnd may meet an abort.
    if (call("group-post", nullptr, Need{}, [&] {
          rrResult_t r = rrGroupStart();
          if (r == rrSuccess) r = rrSend(out.data(), 1024, rrFloat32, right, world_, nullptr);
          if (r == rrSuccess) r = rrRecv(in.data(), 1024, rrFloat32, left, world_, nullptr);
          return r;
        }) != rrSuccess) {
      rrGroupEnd();
      return false;
    }
    if (call("group-end", world_, Need{Need::kLeft}, [] { return rrGroupEnd(); }) != rrSuccess) return false;
    if (!check(in[1023] == static_cast<float>(left + 1 + round), "group send/recv shift")) return false;
  }

  // destroy
  enter(Phase::kDestroy);
  if (!sub_) skip_step();
  if (sub_) {
    rrComm_t sub = sub_;
    sub_ = nullptr;
    if (call("destroy-sub", nullptr, Need{}, [&] { return rrCommDestroy(sub); }) != rrSuccess) return false;
  }
  if (strike_.armed && strike_.kind == Kind::kAbort) {
    // The victim aborts its world instead of destroying it, from the strike
    // thread, while its peers destroy theirs.
    std::unique_lock<std::mutex> lock(w_.mutex);
    w_.handoff = world_;
    world_ = nullptr;
    w_.changed.notify_all();
    return true;
  }
  rrComm_t world = world_;
  world_ = nullptr;
  return call("destroy-world", nullptr, Need{}, [&] { return rrCommDestroy(world); }) == rrSuccess;
}

// After a failure: end what this rank still holds, boundedly. Abort, not
// destroy: a destroy flushes to peers that may be gone.
void Rank::cleanup() {
  std::lock_guard<std::mutex> lock(w_.mutex);
  for (rrComm_t* c : {&sub_, &world_}) {
    if (*c && *c != w_.aborted) (void)rrCommAbort(*c);
    *c = nullptr;
  }
  // Requests of an aborted communicator answer at once and are released.
  for (rrRequest_t req : pending_) (void)rrWait(req);
  pending_.clear();
}

void Rank::strike_thread() {
  std::unique_lock<std::mutex> lock(w_.mutex);
  w_.changed.wait(lock, [&] { return w_.phase.load() >= static_cast<int>(strike_.moment) || w_.finished; });
  lock.unlock();
  std::this_thread::sleep_for(std::chrono::milliseconds(strike_.delay_ms));
  lock.lock();
  const char* kind = kKindNames[static_cast<int>(strike_.kind)];
  // t: when the strike began (an abort's line is printed once it returned).
  double strike_t = monotonic_now();
  Phase landed = Phase::kDone;  // the phase the strike hit; kDone: the one the main thread is in
  auto line = [&](const std::string& extra) {
    const Phase phase = landed != Phase::kDone ? landed : static_cast<Phase>(w_.phase.load());
    return "{\"event\":\"strike\"," + common_fields() + ",\"kind\":\"" + kind + "\",\"moment\":\"" +
           phase_name(strike_.moment) + "\",\"phase\":\"" + phase_name(phase) +
           "\",\"call\":" + json_string(w_.finished ? "none" : w_.call) +
           ",\"step\":" + std::to_string(w_.in_call ? w_.step : w_.step + 0.5) +
           ",\"t\":" + std::to_string(strike_t) +
           extra + "}";
  };
  w_.struck = true;
  switch (strike_.kind) {
    case Kind::kKill:
      emit(line(""));
      raise(SIGKILL);
      break;
    case Kind::kStop:
      emit(line(""));
      raise(SIGSTOP);
      break;
    case Kind::kSocket: {
      // The line first: UCX may abort the process as soon as the sockets
      // are shut (see chaos.py's table).
      const std::vector<int> fds = connected_tcp_sockets();
      emit(line(",\"sockets\":" + std::to_string(fds.size())));
      for (int fd : fds) shutdown(fd, SHUT_RDWR);
      break;
    }
    case Kind::kAbort: {
      // Abort only a call that has run kSettle: the main thread marks a
      // call before entering the library, and an abort in between would
      // free the communicator under a call about to start (the caller's
      // race, not the engine's: comm must not be used after the abort).
      for (;;) {
        w_.changed.wait(lock, [&] { return w_.inside || w_.handoff || w_.finished; });
        if (!w_.inside) break;
        const uint64_t call = w_.calls;
        const double settled = w_.inside_since + kSettle;
        w_.changed.wait_for(lock, std::chrono::duration<double>(std::max(0.0, settled - monotonic_now())),
                            [&] { return w_.calls != call || !w_.inside; });
        if (w_.inside && w_.calls == call && monotonic_now() >= settled) break;
      }
      strike_t = monotonic_now();
      rrComm_t target = w_.inside ? w_.inside : w_.handoff;
      if (!target) {
        emit(line(",\"aborted\":\"none: no communicator left\""));
        break;
      }
      const std::string what = target == w_.handoff ? "world instead of destroying it" : "during the call";
      if (target == w_.handoff) landed = Phase::kDestroy;
      const double t = monotonic_now();
      const rrResult_t r = rrCommAbort(target);
      const double took = monotonic_now() - t;
      w_.aborted = target;
      if (target == w_.handoff) w_.handoff = nullptr;
      emit(line(",\"aborted\":" + json_string(what) + ",\"abort_result\":\"" + result_name(r) +
                "\",\"abort_seconds\":" + std::to_string(took) +
                (r != rrSuccess ? ",\"abort_error\":" + json_string(rrGetLastError(nullptr)) : std::string())));
      break;
    }
  }
}

int Rank::run() {
  std::thread striker;
  if (strike_.armed) striker = std::thread([this] { strike_thread(); });
  bool ok = work();
  if (!ok) cleanup();
  // Anything handed off and not aborted (the strike may have ended first) is
  // the main thread's again, as is nothing the strike took.
  {
    std::lock_guard<std::mutex> lock(w_.mutex);
    w_.phase = static_cast<int>(Phase::kDone);
    w_.call = "none";
    w_.changed.notify_all();
  }
  std::string line = "{\"event\":\"outcome\"," + common_fields();
  if (stopped_by_abort_) {
    line += ",\"result\":\"ok\",\"phase\":\"" + std::string(phase_name(failed_phase_)) +
            "\",\"call\":" + json_string(failed_call_) + ",\"stopped\":\"the strike aborted the communicator\"";
  } else if (ok) {
    line += ",\"result\":\"ok\",\"phase\":\"done\",\"call\":\"none\"";
  } else {
    const double seconds = call_end_ - call_start_;
    line += std::string(",\"result\":\"") + (wrong_ ? "wrong" : result_name(result_)) + "\",\"phase\":\"" +
            phase_name(failed_phase_) + "\",\"call\":" + json_string(failed_call_) +
            ",\"call_start\":" + std::to_string(call_start_) + ",\"t\":" + std::to_string(call_end_) +
            ",\"seconds\":" + std::to_string(seconds) + ",\"error\":" + json_string(error_);
  }
  entered_[static_cast<int>(Phase::kDone)] = monotonic_now();
  line += ",\"entered\":{";
  for (int p = 0; p <= static_cast<int>(Phase::kDone); ++p) {
    line += std::string(p ? "," : "") + "\"" + kPhaseNames[p] + "\":" + std::to_string(entered_[p]);
  }
  line += "},\"steps\":" + std::to_string(step_) + ",\"needed\":[";
  for (size_t p = 0; p < needed_.size(); ++p) line += (p ? "," : "") + std::to_string(needed_[p]);
  line += "]";
  const char* timeout = std::getenv("RR_TIMEOUT_MS");
  line += std::string(",\"timeout_ms\":") + (timeout ? timeout : "null") + "}";
  // Printed before waiting for the strike: a victim that finished first says
  // so, then takes its strike (a kill after its last call).
  emit(line);
  if (striker.joinable()) {
    {
      std::lock_guard<std::mutex> lock(w_.mutex);
      w_.finished = true;
      w_.changed.notify_all();
    }
    striker.join();
    std::lock_guard<std::mutex> lock(w_.mutex);
    if (w_.handoff) {
      // The abort strike never came for it (cannot happen: handoff wakes it).
      (void)rrCommAbort(w_.handoff);
      w_.handoff = nullptr;
    }
  }
  return wrong_ ? 3 : (ok || stopped_by_abort_) ? 0 : 1;
}

bool parse_int(const char* s, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0') return false;
  *out = static_cast<int>(v);
  return true;
}

template <size_t N>
bool parse_name(const char* s, const char* const (&names)[N], int* out) {
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(s, names[i]) == 0) {
      *out = static_cast<int>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2, victim = -1, kind = -1, moment = -1, delay_ms = 0;
  bool ok = true;
  std::string kind_name, moment_name;
  rr::tools::CommandLine command_line("chaos_rank");
  CLI::App& app = command_line.app;
  app.add_option("--rounds", rounds)->check(CLI::Range(0, 1 << 30));
  app.add_option("--victim", victim);
  app.add_option("--kind", kind_name);
  app.add_option("--moment", moment_name);
  app.add_option("--delay-ms", delay_ms)->check(CLI::Range(0, 1 << 30));
  try {
    command_line.parse(argc, argv);
  } catch (const rr::tools::CommandLineError& e) {
    std::fprintf(stderr, "chaos_rank: %s\n", e.what());
    ok = false;
  }
  if (ok && command_line.given("--kind")) ok = parse_name(kind_name.c_str(), kKindNames, &kind);
  if (ok && command_line.given("--moment")) {
    ok = parse_name(moment_name.c_str(), kPhaseNames, &moment) && moment <= static_cast<int>(Phase::kDestroy);
  }
  int rank = -1, size = -1;
  const char* rank_env = std::getenv("RANK");
  const char* size_env = std::getenv("WORLD_SIZE");
  ok = ok && rank_env && size_env && parse_int(rank_env, &rank) && parse_int(size_env, &size) && size >= 2;
  if (!ok || (victim >= 0 && (kind < 0 || moment < 0))) {
    std::fprintf(stderr,
                 "usage: %s [--rounds N] [--victim R --kind kill|stop|abort|socket "
                 "--moment init|split|collective|p2p|destroy --delay-ms MS]\n"
                 "(env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE >= 2; RR_TIMEOUT_MS)\n",
                 argv[0]);
    return 2;
  }
  Strike strike;
  if (victim == rank) {
    strike.armed = true;
    strike.kind = static_cast<Kind>(kind);
    strike.moment = static_cast<Phase>(moment);
    strike.delay_ms = delay_ms;
  }
  Rank r(rank, size, rounds, strike);
  return r.run();
}
