// The life of a ProcessGroupRingreduce: made (from a unique id, by split,
// or without a communicator for reconfigure), tracked for the interpreter's
// exit, aborted, shut down, and what it reports of its communicator's state
// (torch's getError, isInitialized). reconfigure.cpp makes a group's next
// communicator; process_group.cpp issues its operations.

#include <pybind11/pybind11.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "errors.hpp"
#include "gil.hpp"
#include "process_group.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

ProcessGroupRingreduce::ProcessGroupRingreduce(int rank, int size, const rrUniqueId& unique_id,
                                               c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size),
      options_(std::move(options)),
      timeout_(options_->timeout),
      engine_timeout_(options_->timeout) {
  const rrConfig_t config = options_->config();
  check_result(rrCommInitRankConfig(&comm_, size, unique_id, rank, &config), "init");
  completer_ = std::make_unique<Completer>();
  init();
}

namespace {

int comm_rank(rrComm_t comm) {
  int rank = -1;
  check_result(rrCommUserRank(comm, &rank), "split");
  return rank;
}

int comm_size(rrComm_t comm) {
  int size = 0;
  check_result(rrCommCount(comm, &size), "split");
  return size;
}

}  // namespace

ProcessGroupRingreduce::ProcessGroupRingreduce(rrComm_t comm, c10::intrusive_ptr<Options> options)
    : c10d::Backend(comm_rank(comm), comm_size(comm)),
      comm_(comm),
      options_(std::move(options)),
      timeout_(options_->timeout),
      engine_timeout_(options_->timeout) {
  completer_ = std::make_unique<Completer>();
  init();
}

ProcessGroupRingreduce::ProcessGroupRingreduce(int rank, int size, c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size),
      options_(std::move(options)),
      timeout_(options_->timeout),
      engine_timeout_(options_->timeout),
      state_(State::kUnconfigured) {
  completer_ = std::make_unique<Completer>();
  init();
}

ProcessGroupRingreduce::~ProcessGroupRingreduce() { shutdown(); }

namespace {

// The backends made in this process, weakly. Never destroyed: atexit and
// static destructors may still reach it.
struct Live {
  std::mutex mutex;
  pid_t pid = getpid();
  std::vector<c10::weak_intrusive_ptr<ProcessGroupRingreduce>> backends;
};
Live& live() {
  static auto* l = new Live();
  return *l;
}

}  // namespace

void ProcessGroupRingreduce::track(const c10::intrusive_ptr<ProcessGroupRingreduce>& backend) {
  Live& l = live();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.backends.erase(std::remove_if(l.backends.begin(), l.backends.end(),
                                  [](const c10::weak_intrusive_ptr<ProcessGroupRingreduce>& w) { return w.expired(); }),
                   l.backends.end());
  l.backends.emplace_back(backend);
}

void ProcessGroupRingreduce::shutdown_all() {
  Live& l = live();
  // A forked child: another thread may have held the mutex at the fork, and
  // its backends close themselves without it.
  if (l.pid != getpid()) return;
  std::vector<c10::intrusive_ptr<ProcessGroupRingreduce>> backends;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    for (auto& w : l.backends) {
      if (auto b = w.lock()) backends.push_back(std::move(b));
    }
    l.backends.clear();
  }
  for (auto& b : backends) b->shutdown();
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupRingreduce::getBackendOptions() { return options_; }

c10::intrusive_ptr<RingreduceOptions> ProcessGroupRingreduce::options_for_child(
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) const {
  // torch hands a clone of getBackendOptions()'s, with the new group's
  // timeout; other options (a caller's own) give only their timeout.
  if (auto* ours = dynamic_cast<Options*>(opts.get())) return c10::make_intrusive<Options>(*ours);
  auto child = c10::make_intrusive<Options>(*options_);
  if (opts) child->timeout = opts->timeout;
  return child;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupRingreduce::split(const c10::intrusive_ptr<c10d::Store>&,
                                                                const std::vector<int>& ranks,
                                                                const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  static constexpr const char* kOp = "split";
  std::vector<bool> seen(static_cast<size_t>(size_), false);
  for (int r : ranks) {
    check_rank(kOp, "a rank of the new group", r, size_);
    if (seen[static_cast<size_t>(r)]) throw invalid_argument(kOp, "rank " + std::to_string(r) + " is listed twice");
    seen[static_cast<size_t>(r)] = true;
  }
  const auto mine = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = mine != ranks.end();
  const int color = member ? *std::min_element(ranks.begin(), ranks.end()) : RR_SPLIT_NOCOLOR;
  const int key = member ? static_cast<int>(mine - ranks.begin()) : 0;
  // torch's splitGroup splits each backend once, however many device types
  // it serves ("cpu" and "cuda" here), but asks again, for the next device
  // type, a backend that left this rank out (returned nullptr): that second
  // ask of one splitGroup (the same group name and description, unique to
  // it) is answered without a second engine split, which the members do not
  // make.
  const std::string split_name = opts ? opts->group_name + '\n' + opts->group_desc : std::string();
  if (!member && !split_name.empty() && split_name == left_out_of_) return nullptr;
  c10::intrusive_ptr<Options> child_options = options_for_child(opts);
  const rrConfig_t config = child_options->config();
  rrComm_t child = nullptr;
  {
    // In issue order with this group's collectives, as every rank issues it.
    std::unique_lock<std::mutex> lock = lock_issue();
    check_open(kOp);
    check_result(rrCommSplit(comm_, color, key, &child, &config), kOp);
    left_out_of_ = child == nullptr ? split_name : std::string();
  }
  if (child == nullptr) return nullptr;
  auto backend = c10::make_intrusive<ProcessGroupRingreduce>(child, std::move(child_options));
  track(backend);
  return backend;
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupRingreduce::shrink(const std::vector<int64_t>& ranks_to_exclude,
                                                                 int shrink_flags,
                                                                 const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  static constexpr const char* kOp = "shrink";
  static constexpr int kShrinkAbort = 0x01;  // torch.distributed.distributed_c10d.SHRINK_ABORT
  std::vector<int> exclude;
  for (int64_t r : ranks_to_exclude) {
    check_rank(kOp, "a rank to exclude", r, size_);
    exclude.push_back(static_cast<int>(r));
  }
  c10::intrusive_ptr<Options> child_options = options_for_child(opts);
  const rrConfig_t config = child_options->config();
  if ((shrink_flags & kShrinkAbort) != 0) {
    // Not under the issue lock: the operations in flight end now, wherever
    // they wait, and the peers' too.
    rrComm_t comm = nullptr;
    {
      std::lock_guard<std::mutex> lock(issue_mutex_);
      check_open(kOp);
      comm = comm_;
    }
    check_result(rrCommRevoke(comm), kOp);
  }
  rrComm_t child = nullptr;
  {
    std::unique_lock<std::mutex> lock = lock_issue();
    check_open(kOp);
    check_result(rrCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &child, &config), kOp);
  }
  auto backend = c10::make_intrusive<ProcessGroupRingreduce>(child, std::move(child_options));
  track(backend);
  return backend;
}

std::vector<int> ProcessGroupRingreduce::agree_on_failed(bool revoke_first) {
  static constexpr const char* kOp = "agree_on_failed";
  if (revoke_first) {
    // As shrink()'s SHRINK_ABORT: not under the issue lock, so that the
    // operations in flight end now.
    rrComm_t comm = nullptr;
    {
      std::lock_guard<std::mutex> lock(issue_mutex_);
      check_open(kOp);
      comm = comm_;
    }
    check_result(rrCommRevoke(comm), kOp);
  }
  std::vector<int> failed(static_cast<size_t>(size_));
  int n = 0;
  {
    std::unique_lock<std::mutex> lock = lock_issue();
    check_open(kOp);
    check_result(rrCommAgreeFailed(comm_, failed.data(), &n), kOp);
  }
  failed.resize(static_cast<size_t>(n));
  return failed;
}

void ProcessGroupRingreduce::abort() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  if (state_ == State::kUnconfigured) {
    // No communicator yet; one a reconfigure is making now is aborted as it
    // is made (reconfigure.cpp).
    state_ = State::kAborted;
    return;
  }
  if (state_ != State::kOpen) return;
  state_ = State::kAborted;
  (void)rrCommAbort(comm_);
}

void ProcessGroupRingreduce::shutdown() {
  // Called from Python (destroy_process_group), from the destructor (the
  // last reference may go on a thread that holds the GIL) or from a future's
  // callback: waiting for the Completer with the GIL held would stop future
  // callbacks that need it.
  if (getpid() != owner_) {
    // A forked child: the engine's threads and the Completer's stayed in the
    // parent, and a lock may have been held there at the fork. Close the
    // group and leave what it holds (the parent still owns the communicator).
    state_ = State::kShutDown;
    (void)completer_.release();
    return;
  }
  std::optional<pybind11::gil_scoped_release> no_gil;
  release_gil_if_held(&no_gil);
  end_communicator(State::kShutDown);
}

void ProcessGroupRingreduce::end_communicator(State next) {
  bool destroy = false;
  rrComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    if (state_ == State::kShutDown) return;  // by another call: one of them does it
    if (state_ == State::kOpen) {
      if (completer_->idle() && running_here_ == 0 && !p2p_pending() && !issue_paused_) {
        destroy = true;
      } else {
        (void)rrCommAbort(comm_);  // what is in flight may never end otherwise
      }
    }
    state_ = next;
    comm = comm_;
    comm_ = nullptr;
  }
  completer_.reset();  // runs every collective already issued to its end
  std::vector<std::shared_ptr<PointToPoint>> in_flight;
  {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    in_flight.swap(p2p_in_flight_);
  }
  for (auto& p : in_flight) {
    // A transfer may still read or write its tensor; a Work still held
    // learns the outcome from the state.
    std::lock_guard<std::mutex> lock(p->mutex);
    p->advance_locked(/*block=*/true, "shutdown");
  }
  if (destroy) (void)rrCommDestroy(comm);
}

bool ProcessGroupRingreduce::p2p_pending() {
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  return std::any_of(p2p_in_flight_.begin(), p2p_in_flight_.end(),
                     [](const std::shared_ptr<PointToPoint>& p) { return !p->ended.load(std::memory_order_acquire); });
}

bool ProcessGroupRingreduce::isInitialized() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  return state_ == State::kOpen;
}

rrResult_t ProcessGroupRingreduce::async_error() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  if (state_ == State::kUnconfigured) return rrSuccess;  // nothing broke: there is nothing yet
  if (state_ != State::kOpen) return rrInvalidUsage;
  rrResult_t error = rrSuccess;
  check_result(rrCommGetAsyncError(comm_, &error), "async_error");
  return error;
}

c10d::ErrorType ProcessGroupRingreduce::getError() {
  switch (async_error()) {
    case rrSuccess:
      return c10d::ErrorType::SUCCESS;
    case rrTimeout:
      return c10d::ErrorType::TIMEOUT;
    case rrRemoteError:
      return c10d::ErrorType::REMOTE_ERROR;
    default:
      return c10d::ErrorType::COMM_ERROR;
  }
}

std::string ProcessGroupRingreduce::last_error() {
  std::lock_guard<std::mutex> lock(issue_mutex_);
  if (state_ == State::kAborted) return "the process group was aborted";
  if (state_ == State::kShutDown) return "the process group was shut down";
  if (state_ == State::kUnconfigured) return "";
  return rrGetLastError(comm_);
}

}  // namespace ringreduce_torch
