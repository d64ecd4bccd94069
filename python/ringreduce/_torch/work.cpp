#include "work.hpp"

#include <ATen/core/jit_type.h>

#include <algorithm>
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

void Timed::stop_clock() {
  const std::chrono::duration<float, std::milli> took = std::chrono::steady_clock::now() - start_;
  duration_ms_.store(took.count(), std::memory_order_release);
}

float Timed::duration(const char* op_name) const {
  const float ms = duration_ms_.load(std::memory_order_acquire);
  if (ms < 0) {
    throw Error(rrInvalidUsage, std::string("ringreduce ") + op_name +
                                    ": getDuration() has no duration until the operation completed successfully");
  }
  return ms;
}

CollectiveWork::CollectiveWork(int rank, c10d::OpType type, const char* op_name, const char* profile,
                               const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                               std::vector<at::Tensor> keep_alive, std::function<void()> on_success,
                               std::shared_ptr<Hooks> hooks)
    : c10d::Work(rank, type, profile, inputs),
      Timed(std::move(hooks)),
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

void CollectiveWork::run_to_end(const std::function<void()>& engine_done) {
  std::exception_ptr error;
  const rrResult_t result = rrWait(request_);
  request_ = nullptr;
  if (engine_done) engine_done();
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
  if (error) {
    ended_failed(result);
  } else {
    stop_clock();
  }
  // The future first, as Gloo does: once wait() returns, get_future() is done
  // too. The hooks between: the Work reads as completed (isCompleted() is the
  // future's), and a caller that waited finds the completion recorded.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
    ended_ok();
  }
  finish(error);
}

Completer::Completer() : line_(std::make_shared<Line>()), thread_([line = line_] { loop(line); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(line_->mutex);
    line_->stopping = true;
  }
  line_->added.notify_one();
  if (std::this_thread::get_id() != thread_.get_id()) {
    thread_.join();
    return;
  }
  // On the Completer's own thread, inside a future's callback: run what is
  // left here (the process group destroys the communicator next), and let
  // the thread end by itself once the callback returns.
  for (;;) {
    c10::intrusive_ptr<CollectiveWork> work;
    {
      std::lock_guard<std::mutex> lock(line_->mutex);
      if (line_->works.empty()) break;
      work = std::move(line_->works.front());
      line_->works.pop_front();
    }
    work->run_to_end();
  }
  thread_.detach();
}

bool Completer::idle() {
  std::lock_guard<std::mutex> lock(line_->mutex);
  return line_->works.empty() && line_->running == 0;
}

void Completer::add(c10::intrusive_ptr<CollectiveWork> work) {
  {
    std::lock_guard<std::mutex> lock(line_->mutex);
    line_->works.push_back(std::move(work));
  }
  line_->added.notify_one();
}

void Completer::loop(const std::shared_ptr<Line>& line) {
  for (;;) {
    c10::intrusive_ptr<CollectiveWork> work;
    {
      std::unique_lock<std::mutex> lock(line->mutex);
      line->added.wait(lock, [&] { return line->stopping || !line->works.empty(); });
      if (line->works.empty()) return;  // stopping, and every collective ran to its end
      work = std::move(line->works.front());
      line->works.pop_front();
      ++line->running;
    }
    work->run_to_end([&] {
      std::lock_guard<std::mutex> lock(line->mutex);
      --line->running;
    });
  }
}

namespace {

// The tensors of a failed send or receive: the engine leaks a transfer that
// UCX may still hold rather than free it, so the memory it reads or writes
// must stay too.
void keep_forever(std::vector<at::Tensor> tensors) {
  static auto* kept = new std::vector<at::Tensor>();
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  kept->insert(kept->end(), tensors.begin(), tensors.end());
}

}  // namespace

bool PointToPoint::advance_locked(bool block, const char* op_name) {
  if (!request) return true;
  rrStatus_t status{};
  int done = 0;
  const rrResult_t result = block ? rrWaitStatus(request, &status) : rrTestStatus(request, &done, &status);
  if (result == rrSuccess && !block && !done) return false;
  // Finished or failed: either way the engine released the request.
  request = nullptr;
  if (result != rrSuccess) {
    error = std::make_exception_ptr(engine_error(result, op_name));
    this->result = result;
    keep_forever(std::move(keep_alive));
  } else {
    source = status.source;
    try {
      copy_back(staged);
    } catch (...) {
      error = std::current_exception();
    }
  }
  staged.clear();
  keep_alive.clear();
  ended.store(true, std::memory_order_release);
  return true;
}

PointToPointWork::PointToPointWork(int rank, c10d::OpType type, const char* op_name,
                                   std::shared_ptr<PointToPoint> state, std::vector<at::Tensor> outputs,
                                   std::shared_ptr<Hooks> hooks)
    : c10d::Work(rank, type),
      Timed(std::move(hooks)),
      op_name_(op_name),
      state_(std::move(state)),
      outputs_(std::move(outputs)) {}

void PointToPointWork::finish_once() {
  if (finished_.exchange(true)) {
    // Another thread finishes it: a caller returns once it has.
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return completed_; });
    return;
  }
  if (state_->error) {
    ended_failed(state_->result);
  } else {
    stop_clock();
  }
  finish(state_->error);
  if (!state_->error) ended_ok();
}

bool PointToPointWork::advance(bool block) {
  if (!state_->ended.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lock(state_->mutex, std::defer_lock);
    if (block) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return false;  // a blocking wait on another thread holds it
    }
    if (!state_->advance_locked(block, op_name_)) return false;
  }
  finish_once();
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

CoalescedWork::CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
    : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {}

bool CoalescedWork::isCompleted() {
  return std::all_of(works_.begin(), works_.end(), [](const auto& w) { return w->isCompleted(); });
}

bool CoalescedWork::isSuccess() const {
  return std::all_of(works_.begin(), works_.end(), [](const auto& w) { return w->isSuccess(); });
}

std::exception_ptr CoalescedWork::exception() const {
  for (const auto& w : works_) {
    if (auto e = w->exception()) return e;
  }
  return nullptr;
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::exception_ptr first;
  for (const auto& w : works_) {
    std::chrono::milliseconds left = kNoTimeout;
    if (timeout != kNoTimeout) {
      // At least 1 ms: 0 is kNoTimeout, which would wait for ever.
      left = std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        deadline - std::chrono::steady_clock::now()));
    }
    try {
      w->wait(left);
    } catch (...) {
      // A Work.wait(timeout) that expired: the rest are still in flight.
      if (timeout != kNoTimeout && !w->isCompleted()) throw;
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWork::getFuture() {
  if (works_.size() == 1) return works_[0]->getFuture();
  return c10d::Work::getFuture();  // torch's own refusal
}

CompletedWork::CompletedWork(int rank, c10d::OpType type)
    : c10d::Work(rank, type),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  future_->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
}

}  // namespace ringreduce_torch
