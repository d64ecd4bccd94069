#include "comm/operation_queue.hpp"

namespace rr {

std::shared_ptr<AsyncOperation> OperationQueue::enqueue(std::function<Status()> body,
                                                        AsyncOperation::OnDone on_done) {
  auto op = std::make_shared<AsyncOperation>(std::move(body), std::move(on_done));
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) {
    op->status_ = InvalidUsage("the communicator is being destroyed");
    op->done_ = true;
    lock.unlock();
    op->pass_gate();  // finished: on_done fires when its owner arms it
    return op;
  }
  queue_.push_back(op);
  queued_.store(queue_.size());
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  changed_.notify_all();
  return op;
}

void OperationQueue::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] {
      if (overtakers_.load() != 0) return false;
      if (queue_.empty()) return stopping_;
      return take_turn();
    });
    if (queue_.empty()) return;  // stopping, and nothing left to run
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
  changed_.notify_all();
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
    if (!queue_.empty() && queue_.front().get() == &op && overtakers_.load() == 0 && take_turn()) {
      return run_front(lock);
    }
    changed_.wait(lock);
  }
}

bool OperationQueue::test(AsyncOperation& op, Status* status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (op.done_) *status = op.status_;
  return op.done_;
}

void OperationQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

}  // namespace rr
