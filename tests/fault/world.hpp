#pragma once
// The fault tests' world: ranks as forked children of the test process (the
// parent only watches), each reporting the outcome of the call under test
// through a pipe, and a fixture that fails a test which leaves a
// shared-memory segment behind.

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace fault_world {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// What a rank reports to the parent through its pipe.
struct Outcome {
  int result = -1;        // rrResult_t of the call under test
  double seconds = 0;     // how long that call took
  int async_error = -1;   // rrCommGetAsyncError afterwards
  char error[1536] = {};  // rrGetLastError
  int agreed = -1;        // shrink tests: how many ranks the survivors agreed had failed
};

using Body = std::function<void(int rank, rrComm_t comm, Outcome* out)>;

// Runs `body` on `n` forked ranks (those in `silent` may never report; they
// are killed at the end). Returns each rank's Outcome; a rank that did not
// report has result -1. Every child is reaped before it returns.
std::vector<Outcome> run_world(int n, int timeout_ms, const std::set<int>& silent, const Body& body);

void print(const std::vector<Outcome>& outcomes, const std::set<int>& skip = {});
// Records a failed check in *out (result -2, `what` its error) unless an
// earlier one did: a rank's body checks several things and reports the first.
void check(bool ok, const std::string& what, Outcome* out);
// Appends "what: <result's words> (<comm's last error>)" to out->error.
void note(Outcome* out, const char* what, rrResult_t result, rrComm_t comm);
inline bool has(const Outcome& o, const std::string& text) {
  return std::string(o.error).find(text) != std::string::npos;
}

std::set<std::string> shm_segments();

// A call a rank repeats: one collective on `comm`.
using Call = std::function<rrResult_t(rrComm_t comm)>;

// Repeats `call` until it fails (at most `limit` times) and records that
// call in *out: its result, its duration, and the last error (the calling
// thread's after rrCommAbort, `aborted`: the communicator is gone then).
void call_until_failure(rrComm_t comm, const Call& call, Outcome* out, bool aborted = false, long limit = 100000000);

// A body for run_world: `require` (which may _exit a rank whose calls would
// not take the path under test), then `call` until it fails, while the
// victim raises `signal` `delay` into them.
Body strike(int victim, int signal, std::chrono::milliseconds delay, const std::function<void(rrComm_t)>& require,
            const Call& call);

// Two ranks repeat `call` (after `require`); rank 1 stops (SIGSTOP) `delay`
// into them. Rank 0's call must time out within 0.5 s of its 1.5 s timeout,
// naming rank 1 and `where` (the path it waited on).
void expect_stopped_peer_times_out(const std::function<void(rrComm_t)>& require, const Call& call,
                                   std::chrono::milliseconds delay, const std::string& where);
// Two ranks repeat `call`; rank 1 stops for good `delay` into them, and
// another thread of rank 0 aborts the communicator 300 ms in: rank 0's call
// must end with rrInvalidUsage saying so, long before its 60 s timeout.
void expect_abort_ends_the_wait(const std::function<void(rrComm_t)>& require, const Call& call,
                                std::chrono::milliseconds delay);

// Forks `n` ranks that each make a communicator, run `require` and one
// `call`, then SIGKILL themselves 20 + 5 r ms into repeating it. Expects
// every rank to end by its own SIGKILL (the caller's NoShmLeft fixture then
// checks what they left).
void kill_every_rank_mid_calls(int n, const std::function<void(rrComm_t)>& require, const Call& call);

// A call on a fresh buffer of 2^20 floats, all 1.
Call on_floats(const std::function<rrResult_t(rrComm_t comm, float* data)>& call);

// Every rank runs `good` except `odd`, which runs `bad` (after `warmup`
// matching calls on every rank, if any). Each must fail with rrInvalidUsage
// quoting both calls (`good_text`, `bad_text`) and naming `odd`, well
// before the 20 s timeout.
void expect_mismatch(int n, int odd, const Call& good, const Call& bad, const std::string& good_text,
                     const std::string& bad_text, const Call& warmup = nullptr, int warmups = 0);

// Shared-memory segments a test created and did not remove: none may be
// left, by any rank, SIGKILLed ones included (the survivors remove a
// segment a killed rank left, lib/transport/ucx/shm_sweep.hpp).
class NoShmLeft : public ::testing::Test {
 protected:
  void SetUp() override { before_ = shm_segments(); }
  void TearDown() override {
    for (const std::string& name : shm_segments()) {
      if (!before_.count(name)) ADD_FAILURE() << "shared-memory segment left behind: /dev/shm/" << name;
    }
  }
  std::set<std::string> before_;
  int sysv_orphan_ = -1;
};

}  // namespace fault_world
