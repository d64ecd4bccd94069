// dist.monitored_barrier on ringreduce: Gloo's protocol and words
// (ProcessGroupGloo::monitoredBarrier) over the group's tagged
// point-to-point. Ranks 1..N-1 each send rank 0 a byte and wait for a byte
// back; rank 0 waits for every rank's byte, then answers each. A rank that
// did not report in time is named on rank 0, as Gloo names it:
//   [Rank 0]: Rank 2 failed to pass monitoredBarrier in 2000 ms
//   [Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 2000 ms   (wait_all_ranks)
//   Rank 0 timed out in monitoredBarrier after 0 ms. ...   (no time left for the next rank)
// and the ranks that reported fail waiting for rank 0's answer:
//   Rank 1 successfully reached monitoredBarrier, but received errors while
//   waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.
// All reports share one deadline: the call ends within its timeout however
// many ranks are missing (2.00 s for a 2 s timeout with 2 of 4 missing; Gloo
// 2.03 s in the same run: bench/RESULTS.md, "Through torch").
//
// A receive the deadline ended stays posted (the engine's receives cannot be
// taken back) and is the next monitored barrier's receive from that peer
// instead of a new one, so that every report meets exactly one receive: a
// rank's late report counts for rank 0's next monitored barrier, and the
// group never holds more than one such receive per peer. The group's
// shutdown ends what is left (it aborts with receives in flight).

#include <algorithm>
#include <chrono>
#include <string>

#include "process_group.hpp"

namespace ringreduce_torch {

namespace {

constexpr const char* kMonitoredOp = "monitored_barrier";

// Gloo's ending of a failure that has a cause: the message, then the cause.
std::string with_cause(const std::string& error, const std::exception& cause) {
  return error + "\n Original exception: \n" + cause.what();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::monitored_byte(c10d::OpType type, int peer, int tag) {
  at::Tensor byte = at::zeros({1}, at::kByte);
  if (type == c10d::OpType::RECV) {
    // A receive an earlier call left is this call's (the file's comment).
    auto held = monitored_held_.find(peer);
    if (held != monitored_held_.end()) return held->second;
    auto work = point_to_point(type, kMonitoredOp, byte, peer, tag);
    monitored_held_[peer] = work;
    return work;
  }
  return point_to_point(type, kMonitoredOp, byte, peer, tag);
}

void ProcessGroupRingreduce::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  using std::chrono::milliseconds;
  const milliseconds timeout = opts.timeout == c10d::kUnsetTimeout ? group_timeout() : opts.timeout;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // What is left of the deadline, at least 1 ms: Work::wait(0) would block
  // without one, and a byte that arrived is still taken at the last moment.
  auto left = [&] {
    const auto rest = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max(rest, milliseconds(1));
  };
  const std::string in_time = " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";

  std::lock_guard<std::mutex> serial(monitored_mutex_);
  {
    std::lock_guard<std::mutex> lock(issue_mutex_);
    check_open(kMonitoredOp);  // also where no byte moves (1 rank)
  }
  if (size_ == 1) return;

  if (rank_ != 0) {
    try {
      auto report = monitored_byte(c10d::OpType::SEND, 0, kMonitoredBarrierReportTag);
      auto answer = monitored_byte(c10d::OpType::RECV, 0, kMonitoredBarrierAnswerTag);
      report->wait(left());
      answer->wait(left());
      monitored_held_.erase(0);
    } catch (const std::exception& e) {
      throw Error(rrTimeout, with_cause("Rank " + std::to_string(rank_) +
                                            " successfully reached monitoredBarrier, but received errors while "
                                            "waiting for send/recv from rank 0. Please check rank 0 logs for "
                                            "faulty rank.",
                                        e));
    }
    return;
  }

  std::vector<c10::intrusive_ptr<c10d::Work>> reports;
  for (int peer = 1; peer < size_; ++peer) {
    reports.push_back(monitored_byte(c10d::OpType::RECV, peer, kMonitoredBarrierReportTag));
  }
  std::string missing, passed;
  for (int peer = 1; peer < size_; ++peer) {
    if (!wait_all_ranks && std::chrono::steady_clock::now() >= deadline) {
      // Gloo's words when the time ran out between ranks (or was 0).
      throw Error(rrTimeout, "Rank 0 timed out in monitoredBarrier after " + std::to_string(timeout.count()) +
                                 " ms.\n" +
                                 (passed.empty() ? "No ranks successfully processed in monitoredBarrier."
                                                 : "Successfully processed ranks: " + passed));
    }
    try {
      reports[static_cast<size_t>(peer - 1)]->wait(left());
      monitored_held_.erase(peer);
      passed += (passed.empty() ? "" : ", ") + std::to_string(peer);
    } catch (const std::exception& e) {
      if (!wait_all_ranks) throw Error(rrTimeout, with_cause("[Rank 0]: Rank " + std::to_string(peer) + in_time, e));
      missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
    }
  }
  if (!missing.empty()) throw Error(rrTimeout, "[Rank 0]: Ranks " + missing + in_time);

  std::vector<c10::intrusive_ptr<c10d::Work>> answers;
  for (int peer = 1; peer < size_; ++peer) {
    answers.push_back(monitored_byte(c10d::OpType::SEND, peer, kMonitoredBarrierAnswerTag));
  }
  for (int peer = 1; peer < size_; ++peer) {
    try {
      answers[static_cast<size_t>(peer - 1)]->wait(left());
    } catch (const std::exception& e) {
      throw Error(rrTimeout, with_cause("[Rank 0]: Rank " + std::to_string(peer) + in_time, e));
    }
  }
}

}  // namespace ringreduce_torch
