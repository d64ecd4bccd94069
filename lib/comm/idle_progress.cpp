#include "comm/idle_progress.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"

namespace rr::idle_progress {

namespace {

// Rounds in a row in which a transport had events waiting: after these the
// thread sleeps a millisecond between rounds instead of none, so that a
// transport that is never quiet cannot take a core.
constexpr int kBusyRoundsBeforeSleep = 64;

struct State {
  std::mutex mutex;  // held by the thread for a whole round: remove() waits for it
  std::vector<Communicator*> comms;
  std::thread* thread = nullptr;  // a process-lifetime thread, started at the first add()
  bool stopping = false;          // process exit
  int wake = -1;                  // eventfd: add() and exit wake the thread
};

// Never destroyed: the thread may outlive static destructors until exit stops it.
State& state() {
  static State* s = new State;
  return *s;
}

void wake(State& s) {
  if (s.wake < 0) return;
  const uint64_t one = 1;
  (void)!write(s.wake, &one, sizeof(one));
}

void loop(State& s) {
  std::vector<pollfd> fds;
  int busy_rounds = 0;
  for (;;) {
    fds.clear();
    fds.push_back(pollfd{s.wake, POLLIN, 0});
    bool busy = false;
    bool any = false;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (s.stopping) return;
      any = !s.comms.empty();
      for (Communicator* comm : s.comms) {
        int fd = -1;
        bool pending = false;
        // In use: its caller drives it, and it is looked at again within kPeriodMs.
        if (!comm->queue().run_if_idle([&] {
              comm->progress_while_idle(&fd, &pending);
              return Status::Ok();
            })) {
          continue;
        }
        if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
        busy = busy || pending;
      }
    }
    int timeout_ms = -1;  // nothing registered: until add() wakes it
    if (busy) {
      timeout_ms = ++busy_rounds < kBusyRoundsBeforeSleep ? 0 : 1;
    } else if (any) {
      busy_rounds = 0;
      timeout_ms = kPeriodMs;
    }
    (void)poll(fds.data(), fds.size(), timeout_ms);
    if (fds[0].revents & POLLIN) {
      uint64_t count = 0;
      (void)!read(s.wake, &count, sizeof(count));
    }
  }
}

// Exit stops the thread before the libraries' destructors run (UCX's among
// them: a progress call then would crash). atexit handlers run first.
void stop_at_exit() {
  State& s = state();
  std::thread* thread = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stopping = true;
    thread = s.thread;
  }
  wake(s);
  if (thread && thread->joinable()) thread->join();
}

// fork: the child has no thread, and none of the parent's communicators
// that it may use; the mutex is taken around the fork so that the child
// never inherits it held by the thread.
void before_fork() { state().mutex.lock(); }
void after_fork_in_parent() { state().mutex.unlock(); }
void after_fork_in_child() {
  State& s = state();
  s.comms.clear();
  s.thread = nullptr;  // the parent's; nothing to join here (it is leaked, not destroyed)
  if (s.wake >= 0) close(s.wake);
  s.wake = -1;
  s.mutex.unlock();
}

}  // namespace

void add(Communicator* comm) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); });
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.stopping) return;  // the process is exiting
  if (std::find(s.comms.begin(), s.comms.end(), comm) == s.comms.end()) s.comms.push_back(comm);
  if (!s.thread) {
    if (s.wake < 0) s.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s.wake < 0) return;  // no descriptor to spare: calls still progress their own communicators
    static bool exit_hook = false;
    if (!exit_hook) exit_hook = std::atexit(stop_at_exit) == 0;
    try {
      s.thread = new std::thread([&s] { loop(s); });
    } catch (const std::system_error&) {
      return;  // no thread to spare: calls still progress their own communicators
    }
  }
  wake(s);
}

void remove(Communicator* comm) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);  // waits for a round to end
  s.comms.erase(std::remove(s.comms.begin(), s.comms.end(), comm), s.comms.end());
}

}  // namespace rr::idle_progress
