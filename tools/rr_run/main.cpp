// rr-run: the local launcher. Starts N ranks of a program on this host with the
// torch.distributed env:// variables set, tags their output with the rank, and
// takes the whole job down as soon as one rank fails, so a crashed rank never
// leaves its peers blocked in a collective until some distant timeout.
//
// Standalone on purpose: it links nothing from the engine, so it launches any
// env:// program (PyTorch, Gloo tests, rr-bench) and works while the engine
// does not build.
//
// Linux only: signalfd, prctl(PR_SET_PDEATHSIG), pipe2, execvpe,
// sched_setaffinity. Beside this file: the command line (options.hpp), the
// port it picks (ports.hpp), the ranks' output (output.hpp) and where they
// run (binding.hpp).

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "fd.hpp"
#include "options.hpp"
#include "output.hpp"
#include "ports.hpp"

extern char** environ;

namespace rr::run {
namespace {

constexpr int kExitLaunchError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitTimeout = 124;  // what timeout(1) returns
constexpr int kExitNotExecutable = 126;  // shell convention: found but exec failed
constexpr int kExitNotFound = 127;  // shell convention: no such program

// After SIGKILL the kernel tears processes down at once; this bounds the wait
// for ones stuck in uninterruptible sleep and for pipe ends held by processes
// that left the group (setsid daemons), which we cannot signal.
constexpr std::chrono::milliseconds kAfterKillWait{1000};

// Once every rank is reaped, only stray grandchildren can remain in the group;
// they are not our children, so nothing wakes us when they exit and the group
// is re-checked at this period until they are gone.
constexpr std::chrono::milliseconds kStragglerRecheck{50};

// The variables rr-run owns; -x may not set them (it would break rendezvous).
constexpr const char* kLauncherVariables[] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};

// The rendezvous serves only ranks that show the job's secret, and needs one
// as soon as it listens beyond loopback; rr-run gives each job a fresh random
// one unless the user set RR_AUTH_TOKEN. 32 bytes: beyond guessing.
constexpr const char* kAuthTokenVariable = "RR_AUTH_TOKEN";
constexpr std::size_t kAuthTokenBytes = 32;

using Clock = std::chrono::steady_clock;

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  bool exec_failed = false;  // already reported; its exit status is ours, not the program's
  LineStream out;
  LineStream err;
};

// Whether env defines NAME with a value that is not empty.
bool has_value(const std::vector<std::string>& env, const std::string& name) {
  const std::string key = name + "=";
  return std::any_of(env.begin(), env.end(), [&](const std::string& entry) {
    return entry.size() > key.size() && entry.compare(0, key.size(), key) == 0;
  });
}

// Hex of kAuthTokenBytes from the kernel's random source, or nullopt and why.
std::optional<std::string> random_token(std::string& error) {
  unsigned char bytes[kAuthTokenBytes];
  std::size_t done = 0;
  while (done < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + done, sizeof(bytes) - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      error = errno_text(errno);
      return std::nullopt;
    }
  }
  static const char digits[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += digits[b >> 4];
    token += digits[b & 15];
  }
  return token;
}

// Sets NAME=VALUE in env, replacing every earlier definition of NAME.
void set_variable(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  const std::string key = name + "=";
  env.erase(std::remove_if(env.begin(), env.end(),
                           [&](const std::string& entry) { return entry.compare(0, key.size(), key) == 0; }),
            env.end());
  env.push_back(key + value);
}

// What the child reports through its status pipe when it cannot become the rank.
struct ChildFailure {
  enum class Stage : int { kJoinGroup, kBind, kExec };
  Stage stage;
  int error;
};

// Everything the forked child needs, prepared before fork so the child only
// makes system calls.
struct ChildSetup {
  pid_t parent = 0;
  pid_t pgid = 0;  // 0: rank 0 founds the group
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int status_fd = -1;
  const sigset_t* mask = nullptr;
  const struct sigaction* sigpipe_action = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int cpu = -1;  // the CPU to bind to (binding.hpp); -1: none
};

[[noreturn]] void report_child_failure(int status_fd, ChildFailure::Stage stage, int error) {
  const ChildFailure failure{stage, error};
  ssize_t ignored = ::write(status_fd, &failure, sizeof failure);
  (void)ignored;
  ::_exit(kExitNotFound);
}

[[noreturn]] void become_rank(const ChildSetup& setup) {
  // All ranks share one new process group, so one kill(-pgid) reaches them and
  // every grandchild they started.
  if (::setpgid(0, setup.pgid) != 0) {
    report_child_failure(setup.status_fd, ChildFailure::Stage::kJoinGroup, errno);
  }
  // If rr-run dies, nobody is left to escalate or collect output: take the rank along.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != setup.parent) ::_exit(kExitLaunchError);  // it died before prctl

  // Undo what rr-run changed for itself; the program gets the caller's settings.
  ::sigaction(SIGPIPE, setup.sigpipe_action, nullptr);
  ::sigprocmask(SIG_SETMASK, setup.mask, nullptr);
  // One change: SIGUSR1 starts ignored, so a dump request rr-run forwards
  // cannot kill a rank still starting up; ringreduce installs its dump
  // handler over it at the first communicator.
  struct sigaction ignore_usr1 {};
  ignore_usr1.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR1, &ignore_usr1, nullptr);

  if (setup.cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(setup.cpu, &one);
    if (::sched_setaffinity(0, sizeof(one), &one) != 0) {
      report_child_failure(setup.status_fd, ChildFailure::Stage::kBind, errno);
    }
  }
  ::dup2(setup.stdin_fd, STDIN_FILENO);
  ::dup2(setup.stdout_fd, STDOUT_FILENO);
  ::dup2(setup.stderr_fd, STDERR_FILENO);
  ::execvpe(setup.argv[0], setup.argv, setup.envp);
  report_child_failure(setup.status_fd, ChildFailure::Stage::kExec, errno);
}

std::string signal_text(int sig) {
  const char* description = ::strsignal(sig);
  return std::to_string(sig) + " (" + (description != nullptr ? description : "unknown") + ")";
}

class Launcher {
 public:
  Launcher(Options options, Fd signals, const sigset_t& child_mask,
           const struct sigaction& child_sigpipe)
      : options_(std::move(options)),
        signals_(std::move(signals)),
        child_mask_(child_mask),
        child_sigpipe_(child_sigpipe),
        stdout_sink_(STDOUT_FILENO),
        stderr_sink_(STDERR_FILENO) {}

  int run() {
    int port = options_.master_port;
    if (port == 0) {
      std::string error;
      port = pick_free_port(options_.master_addr, error);
      if (port == 0) {
        std::fprintf(stderr, "rr-run: cannot pick a free TCP port on '%s': %s\n",
                     options_.master_addr.c_str(), error.c_str());
        return kExitLaunchError;
      }
    }
    std::string error;
    const std::optional<std::string> token = random_token(error);
    if (!token) {
      std::fprintf(stderr, "rr-run: cannot make a random %s: getrandom: %s\n", kAuthTokenVariable,
                   error.c_str());
      return kExitLaunchError;
    }
    start_ = Clock::now();
    launch_all(port, *token);
    supervise();
    // With --enable-recovery the job went on past its lost ranks: it
    // succeeded when some rank finished it.
    if (!exit_code_ && lost_code_ && !any_success_) return *lost_code_;
    return exit_code_.value_or(0);
  }

 private:
  void launch_all(int port, const std::string& token) {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    for (const auto& [name, value] : options_.extra_env) set_variable(env, name, value);
    if (!has_value(env, kAuthTokenVariable)) set_variable(env, kAuthTokenVariable, token);
    set_variable(env, "MASTER_ADDR", options_.master_addr);
    set_variable(env, "MASTER_PORT", std::to_string(port));
    set_variable(env, "WORLD_SIZE", std::to_string(options_.nranks));
    set_variable(env, "LOCAL_WORLD_SIZE", std::to_string(options_.nranks));

    dev_null_ = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!dev_null_.valid()) {
      fail(kExitLaunchError, "cannot open /dev/null: " + errno_text(errno));
      return;
    }
    std::string cpus_error;
    const std::vector<int> cpus = allowed_cpus(&cpus_error);
    if (cpus.empty() && options_.bind_to != BindTo::kNone) {
      fail(kExitLaunchError, "--bind-to core: cannot read rr-run's CPUs: sched_getaffinity: " + cpus_error);
      return;
    }
    binding_ = plan_binding(options_.bind_to, options_.nranks, cpus);
    ranks_.reserve(static_cast<std::size_t>(options_.nranks));
    for (int index = 0; index < options_.nranks; ++index) {
      set_variable(env, "RANK", std::to_string(index));
      set_variable(env, "LOCAL_RANK", std::to_string(index));
      if (!launch(index, env)) return;
    }
  }

  // Starts one rank and waits until it has exec'd (or failed to), so that the
  // group exists and holds the rank before anything signals it.
  bool launch(int index, const std::vector<std::string>& env) {
    auto out = make_pipe();
    auto err = make_pipe();
    auto status = make_pipe();
    if (!out || !err || !status) {
      fail(kExitLaunchError, "cannot start rank " + std::to_string(index) + ": pipe: " + errno_text(errno));
      return false;
    }
    std::vector<char*> argv;
    for (auto& arg : options_.command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);

    // Ranks run in a background process group: one reading a terminal would be
    // stopped by SIGTTIN and never exit. So stdin goes to rank 0 (as mpirun
    // does) only when it is a pipe or a file.
    const bool pass_stdin = index == 0 && ::isatty(STDIN_FILENO) == 0;

    ChildSetup setup;
    setup.parent = ::getpid();
    setup.pgid = pgid_;
    setup.stdin_fd = pass_stdin ? STDIN_FILENO : dev_null_.get();
    setup.stdout_fd = out->write_end.get();
    setup.stderr_fd = err->write_end.get();
    setup.status_fd = status->write_end.get();
    setup.mask = &child_mask_;
    setup.sigpipe_action = &child_sigpipe_;
    setup.argv = argv.data();
    setup.envp = envp.data();
    setup.cpu = binding_[static_cast<std::size_t>(index)];

    const pid_t pid = ::fork();
    if (pid < 0) {
      fail(kExitLaunchError, "cannot start rank " + std::to_string(index) + ": fork: " + errno_text(errno));
      return false;
    }
    if (pid == 0) become_rank(setup);

    if (pgid_ == 0) pgid_ = pid;
    Rank& rank = ranks_.emplace_back();
    rank.index = index;
    rank.pid = pid;
    rank.running = true;
    const std::string prefix = options_.tag_output ? "[" + std::to_string(index) + "] " : "";
    for (Fd* read_end : {&out->read_end, &err->read_end}) {
      ::fcntl(read_end->get(), F_SETFL, ::fcntl(read_end->get(), F_GETFL) | O_NONBLOCK);
    }
    rank.out = LineStream(std::move(out->read_end), prefix, &stdout_sink_);
    rank.err = LineStream(std::move(err->read_end), prefix, &stderr_sink_);
    out->write_end.reset();
    err->write_end.reset();
    status->write_end.reset();

    // Zero bytes: exec succeeded and closed the close-on-exec write end.
    ChildFailure failure{};
    ssize_t n;
    do {
      n = ::read(status->read_end.get(), &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof failure)) return true;

    rank.exec_failed = true;
    if (failure.stage == ChildFailure::Stage::kJoinGroup) {
      fail(kExitLaunchError, "rank " + std::to_string(index) +
                                 " cannot join the ranks' process group: " + errno_text(failure.error));
    } else if (failure.stage == ChildFailure::Stage::kBind) {
      fail(kExitLaunchError, "rank " + std::to_string(index) + " cannot be bound to CPU " +
                                 std::to_string(setup.cpu) + " (without --bind-to core it runs unbound): " +
                                 errno_text(failure.error));
    } else {
      const bool not_found = failure.error == ENOENT || failure.error == ENOTDIR;
      fail(not_found ? kExitNotFound : kExitNotExecutable,
           "cannot execute '" + options_.command[0] + "': " + errno_text(failure.error));
    }
    return false;
  }

  // The event loop: rank output, SIGCHLD and our own signals through poll, and
  // the timeout and grace deadlines as poll's timeout. Nothing spins.
  void supervise() {
    std::optional<Clock::time_point> drain_since;
    std::vector<pollfd> fds;
    std::vector<LineStream*> streams;
    for (;;) {
      const auto now = Clock::now();
      const bool ranks_done = std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
      const bool pipes_done = std::none_of(ranks_.begin(), ranks_.end(),
                                           [](const Rank& r) { return r.out.open() || r.err.open(); });
      const bool group_alive = pgid_ > 0 && ::kill(-pgid_, 0) == 0;

      if (timeout_at() && now >= *timeout_at()) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", *options_.timeout_s);
        fail(kExitTimeout, std::string("timed out after ") + seconds + " s; stopping all ranks");
      }
      if (term_sent_ && !kill_sent_ && now >= *term_sent_ + grace()) {
        std::fprintf(stderr, "rr-run: %s after %d ms; sending SIGKILL\n",
                     ranks_done ? "processes left in the ranks' process group"
                                : (std::to_string(running_count()) + " rank(s) still running").c_str(),
                     options_.grace_ms);
        signal_all(SIGKILL);
        kill_sent_ = now;
      }
      if (ranks_done) {
        // Every rank is gone: no grandchild may outlive the job, even after success.
        if (group_alive && !term_sent_) {
          signal_all(SIGTERM);
          term_sent_ = now;
        }
        if (!group_alive && pipes_done) break;
        // Someone outside the group (a setsid daemon) holds a pipe open.
        if (!group_alive && !drain_since) drain_since = now;
        if (drain_since && now >= *drain_since + kAfterKillWait) break;
      }
      if (kill_sent_ && now >= *kill_sent_ + kAfterKillWait) {
        for (const Rank& rank : ranks_) {
          if (rank.running) {
            std::fprintf(stderr, "rr-run: rank %d (pid %d) survived SIGKILL; giving up on it\n", rank.index,
                         static_cast<int>(rank.pid));
          }
        }
        break;
      }

      // Sleep until the nearest deadline, or until something happens.
      std::optional<Clock::time_point> wake;
      auto wake_by = [&](Clock::time_point at) { wake = wake ? std::min(*wake, at) : at; };
      if (timeout_at()) wake_by(*timeout_at());
      if (term_sent_ && !kill_sent_) wake_by(*term_sent_ + grace());
      if (kill_sent_) wake_by(*kill_sent_ + kAfterKillWait);
      if (drain_since) wake_by(*drain_since + kAfterKillWait);
      if (ranks_done && group_alive) wake_by(now + kStragglerRecheck);
      int timeout_ms = -1;
      if (wake) {
        // Round up: a sub-millisecond remainder must not turn into a 0 ms spin.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - now).count();
        timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 1'000'000));
      }

      fds.clear();
      streams.clear();
      fds.push_back({signals_.get(), POLLIN, 0});
      for (Rank& rank : ranks_) {
        for (LineStream* stream : {&rank.out, &rank.err}) {
          if (!stream->open()) continue;
          fds.push_back({stream->fd(), POLLIN, 0});
          streams.push_back(stream);
        }
      }
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "rr-run: poll: %s\n", errno_text(errno).c_str());
        signal_all(SIGKILL);
        if (!exit_code_) exit_code_ = kExitLaunchError;
        break;
      }
      // Output first: a rank's last lines should precede the report of its exit.
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) streams[i - 1]->read_some();
      }
      if (fds[0].revents != 0) on_signals();
    }
  }

  void on_signals() {
    signalfd_siginfo info;
    while (::read(signals_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
        continue;
      }
      if (sig == SIGUSR1) {
        // Not a shutdown: ringreduce ranks dump what they wait for (README, "Failure behaviour").
        // To the ranks themselves only: a helper process in their group (a
        // shell, say) would die of SIGUSR1's default action.
        std::fprintf(stderr, "rr-run: got SIGUSR1; forwarding it to all ranks\n");
        for (const Rank& rank : ranks_) {
          if (rank.running) ::kill(rank.pid, SIGUSR1);
        }
        continue;
      }
      if (!exit_code_) {
        // Forward what we got; the ranks decide how to wind down within the grace period.
        std::fprintf(stderr, "rr-run: got signal %s; forwarding it to all ranks\n", signal_text(sig).c_str());
        exit_code_ = 128 + sig;
        signal_all(sig);
        term_sent_ = Clock::now();
      } else if (!kill_sent_) {
        // A second interrupt means "now", as with most launchers.
        std::fprintf(stderr, "rr-run: got signal %s again; sending SIGKILL\n", signal_text(sig).c_str());
        signal_all(SIGKILL);
        kill_sent_ = Clock::now();
      }
    }
  }

  void reap() {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      auto rank = std::find_if(ranks_.begin(), ranks_.end(), [&](const Rank& r) { return r.pid == pid; });
      if (rank == ranks_.end()) continue;  // an orphaned grandchild we adopted as subreaper
      rank->running = false;
      if (rank->exec_failed) continue;
      const std::string who = "rank " + std::to_string(rank->index) + " (pid " + std::to_string(pid) + ")";
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        lose(WEXITSTATUS(status), who + " exited with status " + std::to_string(WEXITSTATUS(status)));
      } else if (WIFSIGNALED(status)) {
        lose(128 + WTERMSIG(status), who + " was killed by signal " + signal_text(WTERMSIG(status)));
      } else {
        any_success_ = true;
      }
    }
  }

  // A rank failed: the job's failure, or with --enable-recovery one the
  // others go on without (until a timeout or a signal stops them all).
  void lose(int code, const std::string& message) {
    if (!options_.enable_recovery || exit_code_) {
      fail(code, message);
      return;
    }
    std::fprintf(stderr, "rr-run: %s; the others go on (--enable-recovery)\n", message.c_str());
    if (!lost_code_) lost_code_ = code;
  }

  // The first failure decides the exit status and starts the shutdown; later
  // ones are usually its consequences (ranks dying of our SIGTERM), so they
  // stay quiet.
  void fail(int code, const std::string& message) {
    if (exit_code_) return;
    std::fprintf(stderr, "rr-run: %s\n", message.c_str());
    exit_code_ = code;
    if (!term_sent_) {
      signal_all(SIGTERM);
      term_sent_ = Clock::now();
    }
  }

  // The group reaches grandchildren; the pids reach a rank that moved itself to
  // another group (a nested launcher, a shell with job control).
  void signal_all(int sig) {
    if (pgid_ > 0) ::kill(-pgid_, sig);
    for (const Rank& rank : ranks_) {
      if (rank.running) ::kill(rank.pid, sig);
    }
  }

  int running_count() const {
    return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  std::optional<Clock::time_point> timeout_at() const {
    if (!options_.timeout_s || exit_code_) return std::nullopt;
    return start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*options_.timeout_s));
  }

  std::chrono::milliseconds grace() const { return std::chrono::milliseconds(options_.grace_ms); }

  Options options_;
  Fd signals_;
  sigset_t child_mask_;
  struct sigaction child_sigpipe_;
  Sink stdout_sink_;
  Sink stderr_sink_;
  Fd dev_null_;
  std::vector<Rank> ranks_;
  std::vector<int> binding_;  // each rank's CPU (binding.hpp), -1: none
  // Rank 0's pid. Linux never reuses a pid while it names a live process group,
  // so signalling -pgid_ cannot reach strangers while any member remains.
  pid_t pgid_ = 0;
  Clock::time_point start_;
  std::optional<int> exit_code_;
  std::optional<int> lost_code_;  // --enable-recovery: the first lost rank's status
  bool any_success_ = false;      // some rank exited 0
  std::optional<Clock::time_point> term_sent_;
  std::optional<Clock::time_point> kill_sent_;
};

}  // namespace
}  // namespace rr::run

int main(int argc, char** argv) {
  using namespace rr::run;
  Options options;
  try {
    options = parse_args(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "rr-run: %s\n\n%s", error.what(), kUsage);
    return kExitUsage;
  }
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }

  // A closed 0/1/2 would let pipe2() hand out those numbers, and dup2 in the
  // child would then leave a close-on-exec pipe end where stdout belongs.
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
  }

  // Signals arrive through a signalfd, so they are blocked here; ranks get the
  // caller's mask back before exec.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&handled, sig);
  sigset_t caller_mask;
  ::sigprocmask(SIG_BLOCK, &handled, &caller_mask);
  // An inherited SIG_IGN for SIGCHLD would make the kernel reap the ranks and
  // hide their exit status from us.
  ::signal(SIGCHLD, SIG_DFL);
  // A closed stdout must not kill the launcher and orphan the ranks (see Sink).
  struct sigaction ignore_sigpipe {};
  ignore_sigpipe.sa_handler = SIG_IGN;
  struct sigaction caller_sigpipe {};
  ::sigaction(SIGPIPE, &ignore_sigpipe, &caller_sigpipe);

  // Orphaned grandchildren are re-parented to us rather than to init: we reap
  // them at once (reap() takes any pid) and their SIGCHLD wakes the loop. Left
  // to init, a killed straggler lingers as a zombie (still a group member for
  // kill(-pgid, 0)) for as long as init takes to reap it.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  Fd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals.valid()) {
    std::fprintf(stderr, "rr-run: signalfd: %s\n", std::strerror(errno));
    return kExitLaunchError;
  }
  Launcher launcher(std::move(options), std::move(signals), caller_mask, caller_sigpipe);
  return launcher.run();
}
