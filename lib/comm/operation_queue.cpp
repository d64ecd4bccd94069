#include "comm/operation_queue.hpp"

#include <pthread.h>
#include <sched.h>

namespace rr {

namespace {

// The worker's scheduling class: SCHED_BATCH while it waits for work, so
// that its wake-up at an enqueue never preempts a running thread (the
// enqueuing one, which most often runs the operation itself in wait(), or a
// rank mid-call on the other core); SCHED_OTHER while it runs an operation,
// which then progresses as any other thread would. Both are unprivileged.
// A worker that started in another class (a real-time one its creator ran
// in, or SCHED_IDLE) keeps it: the class is the program's choice then.
bool started_time_shared() {
  int policy = SCHED_OTHER;
  sched_param param{};
  return pthread_getschedparam(pthread_self(), &policy, &param) == 0 &&
         (policy == SCHED_OTHER || policy == SCHED_BATCH);
}

void worker_class(bool time_shared, int policy) {
  if (!time_shared) return;
  sched_param param{};
  (void)pthread_setschedparam(pthread_self(), policy, &param);
}

// From another thread, before waking it: the worker's wake-up then takes a
// core as any thread's would.
void raise_to_normal(pthread_t worker) {
  sched_param param{};
  (void)pthread_setschedparam(worker, SCHED_OTHER, &param);
}

}  // namespace

std::shared_ptr<AsyncOperation> OperationQueue::enqueue(std::function<Status()> body,
                                                        AsyncOperation::OnDone on_done, bool waited) {
  auto op = std::make_shared<AsyncOperation>(std::move(body), std::move(on_done));
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) {
    op->status_ = InvalidUsage("the communicator is being destroyed");
    op->done_ = true;
    lock.unlock();
    op->pass_gate();  // finished: on_done fires when its owner arms it
    return op;
  }
  // On an idle communicator (the idle-progress thread's few microseconds
  // count as idle) an operation its caller may wait for is first the waiter's.
  if (waited && queue_.empty() && (!running_.load() || idle_progress_.load())) {
    op->worker_from_ = AsyncOperation::Clock::now() + grace_;
  }
  queue_.push_back(op);
  queued_.store(queue_.size());
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  // An operation nobody waits for (a stream-ordered call's host half, a
  // callback's call) is the worker's now: raise it to the normal class
  // before waking it, so that its wake-up takes a core as any thread's
  // would (a batch wake-up waits for a free core or the next tick: a
  // callback's call took 2.9 ms at the median with every core busy, 0.27
  // raised; bench/RESULTS.md, "Through torch"). Outside the lock.
  const bool raise = !waited && worker_batch_.exchange(false);
  const pthread_t worker = worker_.native_handle();
  lock.unlock();
  if (raise) raise_to_normal(worker);
  work_.notify_one();
  return op;
}

void OperationQueue::work() {
  const bool time_shared = started_time_shared();
  worker_class(time_shared, SCHED_BATCH);
  // The class it is in (shared with enqueue(), which may raise it): switched
  // only before it waits and before it runs. A worker started in another
  // class never is.
  worker_batch_.store(time_shared);
  std::unique_lock<std::mutex> lock(mutex_);
  // Before each wait for work: back into SCHED_BATCH, without the lock; then
  // look again, as the queue may have changed meanwhile. Operations that run
  // back to back pay no switch between them.
  auto to_batch = [&] {
    if (!time_shared || worker_batch_.load()) return false;
    lock.unlock();
    worker_class(time_shared, SCHED_BATCH);
    worker_batch_.store(true);
    lock.lock();
    return true;
  };
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;  // every operation ran
      if (to_batch()) continue;
      work_.wait(lock);
      continue;
    }
    const AsyncOperation::Clock::time_point from = queue_.front()->worker_from_;
    if (!stopping_ && AsyncOperation::Clock::now() < from) {
      // Its grace: a thread that waits for it may take it (wait()). A few
      // yields between looks, without the lock the waiter needs.
      const size_t queued = queued_.load();
      lock.unlock();
      for (int i = 0; i < 8 && queued_.load() == queued && AsyncOperation::Clock::now() < from; ++i) {
        sched_yield();
      }
      lock.lock();
      continue;
    }
    // A failed take is answered by the holder's give_turn (an overtaker's
    // too: it counted itself off before it ran).
    if (overtakers_.load() != 0 || !take_turn()) {
      if (to_batch()) continue;
      work_.wait(lock);
      continue;
    }
    if (worker_batch_.exchange(false)) {
      // The turn is held: the front stays, and the class changes without the lock.
      lock.unlock();
      worker_class(time_shared, SCHED_OTHER);
      lock.lock();
    }
    (void)run_front(lock);
  }
}

Status OperationQueue::run_front(std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<AsyncOperation> op = std::move(queue_.front());
  queue_.pop_front();
  queued_.store(queue_.size());
  lock.unlock();
  Status status = run_guarded(op->body_);
  op->body_ = nullptr;  // release what the body captured
  lock.lock();
  op->status_ = status;
  op->done_ = true;
  running_.store(false);
  // Only threads that wait for this one or the next (now free to run it)
  // care, and overtakers waiting for the turn; the others sleep on.
  if (op->waiters_ != 0 || overtakers_.load() != 0 || (!queue_.empty() && queue_.front()->waiters_ != 0)) {
    changed_.notify_all();
  }
  if (!queue_.empty()) work_.notify_one();  // the next one, when a waiter ran this one
  // Outside the lock and the turn: on_done may test the operation, and
  // the next one may start meanwhile.
  lock.unlock();
  op->pass_gate();
  lock.lock();
  return status;
}

Status OperationQueue::wait(AsyncOperation& op) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (op.done_) return op.status_;
    // Next in line, and nothing drives the communicator: run it here rather
    // than wait for the worker thread to wake for it (a call waited right
    // after it was issued then costs no thread hop).
    AsyncOperation* front = queue_.empty() ? nullptr : queue_.front().get();
    if (front == &op && overtakers_.load() == 0) {
      if (take_turn()) return run_front(lock);
      if (idle_progress_.load()) {
        // The idle-progress thread's few microseconds: wait them out awake,
        // as run() does, rather than sleep and pay a wake-up.
        lock.unlock();
        sched_yield();
        lock.lock();
        continue;
      }
    } else if (front != nullptr && front != &op && front->worker_from_ != AsyncOperation::Clock::time_point{}) {
      // Behind an operation in its grace: this thread waits for it too, so
      // the worker takes it now, woken as for a call nobody waits for.
      front->worker_from_ = {};
      if (!stopping_ && worker_.joinable() && worker_batch_.exchange(false)) {
        const pthread_t worker = worker_.native_handle();
        lock.unlock();
        raise_to_normal(worker);
        lock.lock();
      }
      work_.notify_one();
      continue;  // the lock was let go: look again
    }
    ++op.waiters_;
    changed_.wait(lock);
    --op.waiters_;
  }
}

bool OperationQueue::test(AsyncOperation& op, Status* status) {
  bool handed = false;
  bool raise = false;
  pthread_t worker{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (op.done_) {
      *status = op.status_;
      return true;
    }
    // A thread that tests a call instead of waiting for it will not run it:
    // one in its grace is the worker's now, and is woken as a call nobody
    // waits for is (raised first). That hurries a worker still asleep; one
    // already runnable in SCHED_BATCH (woken at the enqueue) is no wake-up
    // for the scheduler, and still waits for a free core or a tick.
    if (op.worker_from_ != AsyncOperation::Clock::time_point{}) {
      op.worker_from_ = {};
      handed = true;
      // (The worker is alive while an operation waits: stop() drains the queue first.)
      raise = !stopping_ && worker_.joinable() && worker_batch_.exchange(false);
      if (raise) worker = worker_.native_handle();
    }
  }
  if (raise) raise_to_normal(worker);
  if (handed) work_.notify_one();
  return false;
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
    work_.notify_one();
  }
  if (worker_.joinable()) worker_.join();
}

}  // namespace rr
