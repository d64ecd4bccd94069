#pragma once
// Orders a communicator's operations. Collectives must run in the order the
// program issued them, the same on every rank; non-blocking collectives are
// queued and run by one worker thread per communicator, so requests may be
// waited in any order without deadlock. A blocking call runs on the calling
// thread when nothing is queued (no thread hop, no allocation, and no lock:
// it takes the turn with one compare-and-swap, and locks only to wake a
// thread that waits for the turn), else it queues behind the others and
// waits. Point-to-point progress may overtake
// queued collectives, but never runs while another operation does: the
// transport is driven by one thread at a time. A point-to-point post that
// finds an operation running (try_run) does not wait for it: the transport
// queues it for the running operation's next progress (post_later). Between
// calls, the idle-progress thread (comm/idle_progress.hpp) takes the turn
// for a few microseconds at a time (run_if_idle): a blocking call that finds
// it there waits it out instead of handing itself to the worker thread.
//
// A non-blocking call is most often waited for at once (torch's
// dist.all_reduce without async_op; MPI-style issue, then wait), and the
// thread that waits runs it itself when it is next in line. So the worker,
// woken for such an operation (a request's, which the caller may wait for)
// queued on an idle communicator, leaves it to its waiter for a grace
// (kWaiterGrace), yielding its core meanwhile, before it takes it; a thread
// that waits for an operation queued behind it ends the grace. Taking it at
// once, the worker won the turn in a third of the calls: the waiter slept
// through the call and paid a scheduler wake-up at its end (bench/RESULTS.md,
// "Through torch"). It is not asleep for the grace: a timed sleep costs more
// here than the grace itself (arming and disarming a timer is two VM exits,
// 11 us on this machine). An operation queued behind others, or one nobody
// waits for, is the worker's as soon as the turn is free. The worker has a
// condition variable of its own, notified only when it has something to
// run, so that the end of every operation does not wake it, and it waits in
// SCHED_BATCH, whose wake-up preempts no running thread: woken at every
// enqueue in the normal class, it took the core of the thread that was to
// wait for the operation (one involuntary switch per call). An operation
// that is the worker's at once (nobody waits for it; or one in its grace
// that a thread tests instead of waiting for, which ends the grace, or
// waits behind) raises it to the normal class before the wake-up, which
// then takes a core as any thread's would. Likewise the end
// of an operation wakes the threads asleep in wait() only when one of them
// waits for it, or for the next one (to run it), or an overtaker waits for
// the turn: a thread that waits for the last of a burst of requests slept
// through each one's end, and was woken by every one (8 us a call at 2 ranks).

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <mutex>
#include <thread>

#include "common/status.hpp"

namespace rr {

class AsyncOperation {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once with the operation's result, on the thread that finished it
  // or armed it, whichever came last.
  using OnDone = std::function<void(const Status&)>;
  explicit AsyncOperation(std::function<Status()> body, OnDone on_done = nullptr)
      : body_(std::move(body)), on_done_(std::move(on_done)) {}

  // Lets on_done fire: now if the operation finished already, else when it
  // does. Its owner arms it once the operation is known where on_done looks
  // (the request registered), so the two never race.
  void arm() { pass_gate(); }

 private:
  friend class OperationQueue;
  void pass_gate() {
    if (on_done_ && gates_.fetch_add(1, std::memory_order_acq_rel) == 1) on_done_(status_);
  }
  std::function<Status()> body_;
  OnDone on_done_;
  std::atomic<int> gates_{0};  // finished, armed: on_done fires at the second
  bool done_ = false;
  Status status_;
  // Until then the worker leaves it to a thread that waits for it (set when
  // it was queued on an idle communicator; the epoch otherwise).
  Clock::time_point worker_from_{};
  // Threads asleep in wait() for it (under the queue's lock): the end of an
  // operation wakes the waiters only when one waits for it or for the next.
  int waiters_ = 0;
};

class OperationQueue {
 public:
  // How long the worker leaves an operation queued on an idle communicator
  // to a thread that waits for it.
  static constexpr std::chrono::microseconds kWaiterGrace{20};

  // `grace`: kWaiterGrace, or another for tests.
  explicit OperationQueue(std::chrono::microseconds grace = kWaiterGrace) : grace_(grace) {}
  ~OperationQueue() { stop(); }
  OperationQueue(const OperationQueue&) = delete;
  OperationQueue& operator=(const OperationQueue&) = delete;

  // Runs `body` in program order: now on this thread when the queue is idle,
  // else after everything queued before it. `overtake` lets point-to-point
  // work skip queued operations (it still waits for the running one).
  template <typename Body>
  Status run(Body&& body, bool overtake = false) {
    // Nothing queued, nobody waiting to slip in: take the turn without the lock.
    if (!overtake && queued_.load() == 0 && overtakers_.load() == 0 && take_turn_past_idle_progress()) {
      Status status = run_guarded(body);
      give_turn();
      return status;
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (overtake) {
        // The worker lets waiting overtakers in between two queued operations.
        overtakers_.fetch_add(1);
        changed_.wait(lock, [&] { return take_turn(); });
        overtakers_.fetch_sub(1);
      }
      if (overtake || (queue_.empty() && take_turn())) {
        lock.unlock();
        Status status = run_guarded(body);
        give_turn();
        return status;
      }
    }
    auto op = enqueue(std::function<Status()>(std::forward<Body>(body)));
    return wait(*op);
  }

  // Runs `body` now on this thread when no operation runs, as run() with
  // `overtake` does, but never waits: false (and *status untouched) when
  // one runs, or, with `only_when_idle`, when any is queued either.
  template <typename Body>
  bool try_run(Body&& body, Status* status, bool only_when_idle = false) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if ((only_when_idle && !queue_.empty()) || !take_turn()) return false;
    }
    *status = run_guarded(body);
    give_turn();
    return true;
  }

  // For the idle-progress thread: runs `body` now when nothing runs, waits
  // or is queued, else returns false at once.
  template <typename Body>
  bool run_if_idle(Body&& body) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_ || !queue_.empty() || overtakers_.load() != 0) return false;
      idle_progress_.store(true);  // before the turn: a caller that misses it then waits it out
      if (!take_turn()) {
        idle_progress_.store(false);
        return false;
      }
    }
    (void)run_guarded(body);
    give_turn();
    idle_progress_.store(false);  // after the turn: a caller waiting it out takes it
    return true;
  }

  // Queues `body` to run on the worker thread; returns at once. `on_done`,
  // when given, fires once the operation finished and was armed. `waited`:
  // the caller may wait for it at once (a request's), so on an idle queue
  // it is the waiter's for the grace; else (a callback completes it, or
  // nobody waits: a stream-ordered call's host half) the worker's at once.
  std::shared_ptr<AsyncOperation> enqueue(std::function<Status()> body, AsyncOperation::OnDone on_done = nullptr,
                                          bool waited = false);
  // Blocks until `op` ran; its result. When `op` is next in line and no
  // operation runs, it runs on this thread.
  Status wait(AsyncOperation& op);
  // Whether `op` ran, and its result when it did.
  bool test(AsyncOperation& op, Status* status);
  // Whether operations wait to run on the worker thread.
  bool has_queued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !queue_.empty();
  }
  // For dumps, from any thread: whether an operation runs, how many wait.
  void snapshot(bool* running, size_t* queued) {
    std::lock_guard<std::mutex> lock(mutex_);
    *running = running_.load();
    *queued = queue_.size();
  }
  // Waits for the queue to drain, then ends the worker thread.
  void stop();

 private:
  void work();
  // Runs the first queued operation (the caller took the turn), with `lock`
  // held on entry and on return; gives the turn back; its result.
  Status run_front(std::unique_lock<std::mutex>& lock);
  // The turn to drive the communicator: at most one thread holds it. Taken
  // by compare-and-swap (with or without the lock); given back with a wake-up,
  // under the lock, only when a thread may be waiting for it: a queued
  // operation's worker or an overtaker (each counted under the lock, before
  // it looks at the turn, so a give-back never misses one).
  bool take_turn() {
    bool idle = false;
    return running_.compare_exchange_strong(idle, true);
  }
  // take_turn(), waiting while the idle-progress thread holds the turn (a
  // few microseconds); false when a call holds it.
  bool take_turn_past_idle_progress() {
    for (;;) {
      if (take_turn()) return true;
      if (!idle_progress_.load()) return false;
      sched_yield();
    }
  }
  void give_turn() {
    running_.store(false);
    if (queued_.load() != 0 || overtakers_.load() != 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      changed_.notify_all();
      if (!queue_.empty()) work_.notify_one();
    }
  }
  // An escaping exception becomes a status: the token must always come back.
  template <typename Body>
  static Status run_guarded(Body& body) {
    try {
      return body();
    } catch (const std::bad_alloc&) {
      return SystemError("out of host memory");
    } catch (const std::exception& e) {
      return InternalError(std::string("internal error: ") + e.what());
    }
  }

  std::mutex mutex_;
  // Waiters, overtakers and blocking calls queued: an operation ended or the
  // turn came free.
  std::condition_variable changed_;
  // The worker: an operation was queued, or the turn came free with one
  // queued.
  std::condition_variable work_;
  std::deque<std::shared_ptr<AsyncOperation>> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), for the lock-free look
  std::atomic<bool> running_{false};  // the turn (take_turn / give_turn)
  bool stopping_ = false;
  std::atomic<int> overtakers_{0};  // threads waiting to slip point-to-point work in
  std::atomic<bool> idle_progress_{false};  // the idle-progress thread has (or is taking) the turn
  // The worker waits in SCHED_BATCH (set by it); enqueue() of an operation
  // nobody waits for raises it to SCHED_OTHER before the wake-up.
  std::atomic<bool> worker_batch_{false};
  const std::chrono::microseconds grace_;
  std::thread worker_;
};

}  // namespace rr
