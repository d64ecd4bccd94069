#include "work.hpp"

#include <ATen/core/jit_type.h>

#include <string>
#include <utility>

#include "errors.hpp"

namespace ringreduce_torch {

namespace {

Error wait_timed_out(const char* op_name, std::chrono::milliseconds timeout) {
  return Error(rrTimeout, std::string("ringreduce ") + op_name + ": Work.wait(timeout=" +
                              std::to_string(timeout.count()) +
                              " ms) expired; the operation is still in flight");
}

}  // namespace

CollectiveWork::CollectiveWork(int rank, c10d::OpType type, const char* op_name,
                               std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                               std::function<void()> on_success)
    : c10d::Work(rank, type),
      op_name_(op_name),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      on_success_(std::move(on_success)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool CollectiveWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    throw wait_timed_out(op_name_, timeout);
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void CollectiveWork::run_to_end() {
  std::exception_ptr error;
  const rrResult_t result = rrWait(request_);
  request_ = nullptr;
  if (result != rrSuccess) {
    error = std::make_exception_ptr(engine_error(result, op_name_));
  } else {
    try {
      if (on_success_) on_success_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  on_success_ = nullptr;
  keep_alive_.clear();
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

Completer::Completer() : thread_([this] { loop(); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  added_.notify_one();
  thread_.join();
}

void Completer::add(c10::intrusive_ptr<CollectiveWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    line_.push_back(std::move(work));
  }
  added_.notify_one();
}

void Completer::loop() {
  for (;;) {
    c10::intrusive_ptr<CollectiveWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      added_.wait(lock, [&] { return stopping_ || !line_.empty(); });
      if (line_.empty()) return;  // stopping, and every collective ran to its end
      work = std::move(line_.front());
      line_.pop_front();
    }
    work->run_to_end();
  }
}

PointToPointWork::PointToPointWork(int rank, c10d::OpType type, const char* op_name,
                                   std::shared_ptr<PointToPoint> state, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), op_name_(op_name), state_(std::move(state)), outputs_(std::move(outputs)) {}

bool PointToPointWork::advance(bool block) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->request) return true;
  rrStatus_t status{};
  int done = 0;
  const rrResult_t result = block ? rrWaitStatus(state_->request, &status)
                                  : rrTestStatus(state_->request, &done, &status);
  if (result == rrSuccess && !block && !done) return false;
  // Finished or failed: either way the engine released the request.
  state_->request = nullptr;
  std::exception_ptr error;
  if (result != rrSuccess) {
    error = std::make_exception_ptr(engine_error(result, op_name_));
  } else {
    state_->source = status.source;
    try {
      copy_back(state_->staged);
    } catch (...) {
      error = std::current_exception();
    }
  }
  state_->staged.clear();
  state_->keep_alive.clear();
  state_->ended.store(true, std::memory_order_release);
  finish(error);
  return true;
}

bool PointToPointWork::isCompleted() { return advance(false); }

bool PointToPointWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    advance(true);
  } else {
    // Poll: a blocking engine wait would run to the communicator's timeout.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int polls = 0; !advance(false); ++polls) {
      if (std::chrono::steady_clock::now() >= deadline) throw wait_timed_out(op_name_, timeout);
      if (polls < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int PointToPointWork::sourceRank() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->source;
}

}  // namespace ringreduce_torch
