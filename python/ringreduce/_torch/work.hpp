#pragma once
// The c10d::Work objects the backend hands back, and the thread that
// completes the collective ones.
//
// Collectives are issued at the call with the engine's ...Async forms (so the
// caller returns at once and DDP's backward pass overlaps them), and finish
// in the order issued. One Completer thread per process group waits for each
// in that order (the engine runs one on the thread that waits for it when
// nothing else runs), copies staged results into the caller's tensors, and
// then completes the Work and its future: DDP's gradient hook chains on
// getFuture() and never calls wait(), so completion cannot wait for a waiter.
// A collective torch waits for at once (opts.asyncOp false) is not in the
// Completer's line: its caller runs it to its end (run_to_end) before the
// Work is handed back.
//
// Point-to-point requests finish in any order (a receive may wait for a peer
// that first needs this rank's later collective), so they never sit in the
// Completer's line: their Work tests and waits its own request.
//
// Every Work is timed from its issue to the moment its end is known (the
// engine call's end for a collective; the test or wait that found it ended
// for a send or receive): getDuration(), and the completion hooks' duration
// (hooks.hpp), which fire once the Work completed successfully. A failure
// runs the group's abort hooks before the caller can see it.

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ringreduce/ringreduce.h>

#include "hooks.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

// What both kinds of Work share: the group's hooks, the completion key, the
// clock.
class Timed {
 public:
  explicit Timed(std::shared_ptr<Hooks> hooks)
      : hooks_(std::move(hooks)), key_(Hooks::next_key()), start_(std::chrono::steady_clock::now()) {}

 protected:
  // The Work ended successfully: its duration is kept, before it reads as
  // completed (torch's flight recorder asks getDuration() of a Work it finds
  // completed, and stops asking after one refusal).
  void stop_clock();
  // Then, once it reads as completed, the hooks hear of it (the flight
  // recorder asks isCompleted() for a completion that came before it knew
  // the key), before wait() returns on the thread that ends it.
  void ended_ok() { hooks_->completed(key_, duration_ms_.load(std::memory_order_acquire)); }
  // The Work failed with `result`: the abort hooks, where they apply.
  void ended_failed(rrResult_t result) { hooks_->failed(result); }
  // getDuration(): the milliseconds from issue to end, once ended successfully.
  float duration(const char* op_name) const;

  const std::shared_ptr<Hooks> hooks_;
  const uint64_t key_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<float> duration_ms_{-1.0f};
};

class CollectiveWork : public c10d::Work, private Timed {
 public:
  // `outputs`: result() and the future's value. `keep_alive`: every tensor the
  // engine reads or writes until the call finished. `on_success` runs on the
  // Completer's thread once the engine call succeeded (copies out of staging).
  // `profile`: the name torch.profiler shows ("ringreduce:all_reduce"), with
  // `inputs`' shapes. `on_success` runs on the caller's thread instead for a
  // call waited for at once.
  CollectiveWork(int rank, c10d::OpType type, const char* op_name, const char* profile,
                 const std::vector<at::Tensor>& inputs, std::vector<at::Tensor> outputs,
                 std::vector<at::Tensor> keep_alive, std::function<void()> on_success,
                 std::shared_ptr<Hooks> hooks);

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // From the future, which completes first (DDP's hooks chain on it): once
  // it has, the Work says so too, with its outcome, before wait() wakes.
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  float getDuration() const override { return duration(op_name_); }
#ifdef C10D_BACKEND_HAS_HOOKS
  uint64_t getCompletionKey() const override { return key_; }
#endif

  const char* op_name() const { return op_name_; }
  // The Completer's side: the engine request, then the outcome.
  void set_request(rrRequest_t request) { request_ = request; }
  // Waits for the engine call; then `engine_done` runs (the Completer counts
  // the call as ended there, before any waiter can wake), then the Work
  // completes (copies out of staging, the future, wait()).
  void run_to_end(const std::function<void()>& engine_done = nullptr);

 private:
  const char* op_name_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> on_success_;
  rrRequest_t request_ = nullptr;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Waits for each collective in the order added, on a thread of its own.
class Completer {
 public:
  Completer();
  // Runs every collective already added to its end, then stops. Also safe on
  // the Completer's own thread (a future's callback that drops the last
  // reference to the process group): it then runs the rest itself.
  ~Completer();
  void add(c10::intrusive_ptr<CollectiveWork> work);
  // True when every collective added has ended.
  bool idle();

 private:
  // Shared with the thread, which may outlive this object by the unwinding
  // of one callback when it is destroyed from there.
  struct Line {
    std::mutex mutex;
    std::condition_variable added;
    std::deque<c10::intrusive_ptr<CollectiveWork>> works;
    int running = 0;  // taken off `works`, its engine call not yet ended
    bool stopping = false;
  };
  static void loop(const std::shared_ptr<Line>& line);

  std::shared_ptr<Line> line_;
  std::thread thread_;
};

// A send or receive in flight: its request and the tensors it uses. Shared by
// the Work and the process group, which waits out any the caller dropped
// before it destroys the communicator (the engine may still write them).
struct PointToPoint {
  std::mutex mutex;  // held while testing or waiting the request
  rrRequest_t request = nullptr;  // null once finished
  std::vector<at::Tensor> keep_alive;
  std::vector<Staged> staged;  // a receive into a non-contiguous tensor
  int source = -1;
  // What ended it, for a Work that learns of the end later: the process
  // group waits out requests whose Work was dropped, and its destructor all
  // of them.
  std::exception_ptr error;
  rrResult_t result = rrSuccess;  // the engine's, when it failed
  // Set once the request ended; read without the mutex, which a blocking
  // wait holds.
  std::atomic<bool> ended{false};

  // Tests (block = false) or waits for the request, with `mutex` held; once
  // it ended, records the outcome, copies a staged receive back and lets go
  // of the tensors. True once ended.
  bool advance_locked(bool block, const char* op_name);
};

class PointToPointWork : public c10d::Work, private Timed {
 public:
  PointToPointWork(int rank, c10d::OpType type, const char* op_name, std::shared_ptr<PointToPoint> state,
                   std::vector<at::Tensor> outputs, std::shared_ptr<Hooks> hooks);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  float getDuration() const override { return duration(op_name_); }
#ifdef C10D_BACKEND_HAS_HOOKS
  uint64_t getCompletionKey() const override { return key_; }
#endif

 private:
  // Tests (block = false) or waits for the request; finishes the Work once it
  // ended. True once finished.
  bool advance(bool block);
  void finish_once();

  const char* op_name_;
  std::shared_ptr<PointToPoint> state_;
  std::vector<at::Tensor> outputs_;
  std::atomic<bool> finished_{false};  // finish_once's: the hooks hear of it once
};

// What endCoalescing() returns: the Works issued between startCoalescing()
// and it, as one (torch's batch_isend_irecv and _coalescing_manager wait
// on it). Completed when all are; its exception is the first one's.
class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // Waits for each in turn, within `timeout` for them all.
  bool wait(std::chrono::milliseconds timeout) override;
  // A collective's future, when it holds one collective and nothing else
  // (the coalesced collectives are one engine call); sends and receives
  // have none.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  const std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

// A Work that ended before it was handed back (reconfigure, which returns
// once the new communicator is made): completed, successful, and its future
// holds no tensors.
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(int rank, c10d::OpType type);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringreduce_torch
