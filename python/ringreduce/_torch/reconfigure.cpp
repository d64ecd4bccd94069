// torch's fault-tolerance contract on the backend (torch >= 2.14's
// supportsReconfigure / get_reconfigure_handle / reconfigure, as Gloo has it):
// a group made with enable_reconfigure=True gets its communicator, and each
// later one, from handles its members exchanged out of band.
//
// A handle is a ringreduce unique id in text: the rendezvous this rank serves.
// The member first in the handles' order serves the new communicator's
// rendezvous (its id is every member's rrCommInitRank id), so reconfigure
// needs no store; the others' rendezvous stay unused and their handles good
// for the next reconfigure.

#include <pybind11/pybind11.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "errors.hpp"
#include "gil.hpp"
#include "process_group.hpp"

#ifdef C10D_BACKEND_HAS_RECONFIGURE

namespace ringreduce_torch {

namespace {

constexpr const char* kReconfigureOp = "reconfigure";
constexpr char kHandlePrefix[] = "ringreduce-handle:";
constexpr char kHex[] = "0123456789abcdef";

std::string encode_handle(const rrUniqueId& id) {
  std::string text = kHandlePrefix;
  for (int i = 0; i < RR_UNIQUE_ID_BYTES; ++i) {
    const auto byte = static_cast<unsigned char>(id.internal[i]);
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The unique id in `text`, or nullopt when it is not a handle of ours.
std::optional<rrUniqueId> decode_handle(const std::string& text) {
  const size_t prefix = sizeof(kHandlePrefix) - 1;
  if (text.size() != prefix + 2 * RR_UNIQUE_ID_BYTES || text.compare(0, prefix, kHandlePrefix) != 0) {
    return std::nullopt;
  }
  rrUniqueId id;
  for (int i = 0; i < RR_UNIQUE_ID_BYTES; ++i) {
    const int high = hex_digit(text[prefix + 2 * i]);
    const int low = hex_digit(text[prefix + 2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    id.internal[i] = static_cast<char>(high * 16 + low);
  }
  return id;
}

// The members' handles in rank order: a list as given, a set sorted (every
// member sorts the same set the same way).
std::vector<std::string> ordered(const c10d::ReconfigureOptions& opts) {
  if (const auto* list = std::get_if<std::vector<c10d::ReconfigureHandle>>(&opts.handles)) return *list;
  const auto& set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
  std::vector<std::string> handles(set.begin(), set.end());
  std::sort(handles.begin(), handles.end());
  return handles;
}

// FNV-1a over the handles in order: what the members compare to find out
// that they were given the same ones.
int64_t fingerprint(const std::vector<std::string>& handles) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& handle : handles) {
    for (char c : handle) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator, so that ["ab","c"] differs from ["a","bc"]
  }
  return static_cast<int64_t>(h);
}

// What differs between the members of `comm` in the call that made it:
// empty when every member passed `uuid` and handles of `print`, else the
// first difference, naming the member. Every member sees the same table, so
// all of them find the same.
std::string different_call(rrComm_t comm, int rank, int size, int64_t uuid, int64_t print) {
  const int64_t mine[2] = {uuid, print};
  std::vector<int64_t> all(2 * static_cast<size_t>(size));
  check_result(rrAllGather(mine, all.data(), 2, rrInt64, comm, nullptr), kReconfigureOp);
  for (int r = 0; r < size; ++r) {
    if (all[2 * r] != uuid) {
      return "member " + std::to_string(r) + " passed uuid=" + std::to_string(all[2 * r]) + " and member " +
             std::to_string(rank) + " (this rank) uuid=" + std::to_string(uuid) +
             ": every member passes the same uuid";
    }
    if (all[2 * r + 1] != print) {
      return "member " + std::to_string(r) + " passed other handles than member " + std::to_string(rank) +
             " (this rank), or in another order: every member passes the same handles";
    }
  }
  return "";
}

}  // namespace

c10d::ReconfigureHandle ProcessGroupRingreduce::get_reconfigure_handle() const {
  std::lock_guard<std::mutex> lock(reconfigure_mutex_);
  if (handle_.empty()) {
    rrUniqueId id;
    check_result(rrGetUniqueId(&id), "get_reconfigure_handle");
    handle_ = encode_handle(id);
  }
  return handle_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::reconfigure(const c10d::ReconfigureOptions& opts) {
  std::lock_guard<std::mutex> lock(reconfigure_mutex_);
  const std::vector<std::string> handles = ordered(opts);
  if (handles.empty()) throw invalid_argument(kReconfigureOp, "handles is empty: pass one handle per member");
  if (handles.size() > static_cast<size_t>(INT_MAX)) throw invalid_argument(kReconfigureOp, "too many handles");
  const int size = static_cast<int>(handles.size());
  std::optional<rrUniqueId> serving;
  int rank = -1;
  for (int i = 0; i < size; ++i) {
    const std::string& handle = handles[static_cast<size_t>(i)];
    std::optional<rrUniqueId> id = decode_handle(handle);
    if (!id) {
      throw invalid_argument(kReconfigureOp, "handles[" + std::to_string(i) + "] is not a ringreduce handle (each member's "
                                  "comes from its group's get_reconfigure_handle())");
    }
    if (std::find(handles.begin(), handles.begin() + i, handle) != handles.begin() + i) {
      throw invalid_argument(kReconfigureOp, "handles[" + std::to_string(i) + "] is listed twice: one handle per member");
    }
    if (i == 0) serving = id;
    if (!handle_.empty() && handle == handle_) rank = i;
  }
  if (rank < 0) {
    throw invalid_argument(kReconfigureOp, "this rank's handle is not among the " + std::to_string(size) +
                                    " handles: each member passes the one its group's get_reconfigure_handle() "
                                    "returned last" +
                                    (handle_.empty() ? " (this group has made none yet)" : ""));
  }
  if (used_uuids_.count(opts.uuid) != 0) {
    throw invalid_argument(kReconfigureOp, "uuid=" + std::to_string(opts.uuid) +
                                    " was used before on this group: pass a fresh value on every reconfigure");
  }
  std::chrono::milliseconds group_timeout;
  {
    std::lock_guard<std::mutex> issue(issue_mutex_);
    if (state_ == State::kShutDown) check_open(kReconfigureOp);  // an aborted group may be made again, not a closed one
    group_timeout = timeout_;
  }

  // Every member waits here for the others: never with the GIL held.
  std::optional<pybind11::gil_scoped_release> no_gil;
  release_gil_if_held(&no_gil);
  end_communicator(State::kUnconfigured);
  {
    // Receives an earlier monitored barrier left in flight were the old
    // communicator's, which ended them.
    std::lock_guard<std::mutex> monitored(monitored_mutex_);
    monitored_held_.clear();
  }
  const std::chrono::milliseconds timeout = opts.timeout.value_or(group_timeout);
  rrConfig_t config = options_->config();
  config.timeout_ms = config_timeout_ms(timeout);
  rrComm_t comm = nullptr;
  const rrResult_t made = rrCommInitRankConfig(&comm, size, *serving, rank, &config);
  // The first member's rendezvous now belongs to the new communicator (or
  // died with a failed one): its next handle is a fresh one.
  if (rank == 0) handle_.clear();
  check_result(made, kReconfigureOp);
  std::string difference;
  try {
    difference = different_call(comm, rank, size, opts.uuid, fingerprint(handles));
    // The group's timeout for its operations; opts.timeout was the making's.
    if (timeout != group_timeout) check_result(rrCommSetTimeout(comm, config_timeout_ms(group_timeout)), kReconfigureOp);
  } catch (...) {
    (void)rrCommAbort(comm);
    throw;
  }
  if (!difference.empty()) {
    // Ended in order: a peer may still be finishing the all-gather, which
    // an abort would break before it saw the difference too.
    (void)rrCommDestroy(comm);
    throw invalid_argument(kReconfigureOp, difference);
  }
  {
    std::lock_guard<std::mutex> issue(issue_mutex_);
    if (state_ != State::kUnconfigured) {  // aborted or shut down meanwhile: so is the new one
      (void)rrCommAbort(comm);
      check_open(kReconfigureOp);
    }
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    engine_timeout_ = group_timeout;  // what the engine has
    sequence_ = 0;
    completer_ = std::make_unique<Completer>();
    state_ = State::kOpen;
  }
  used_uuids_.insert(opts.uuid);
  return c10::make_intrusive<CompletedWork>(rank, c10d::OpType::UNKNOWN);
}

}  // namespace ringreduce_torch

#endif  // C10D_BACKEND_HAS_RECONFIGURE
