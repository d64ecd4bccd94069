#include "plan.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "values.hpp"

namespace soak {

namespace {

// Sizes: log-uniform within tiers, the large ones rare, so the loop keeps a
// high call rate while a run of minutes still moves tens of 16-64 MiB
// buffers. Mean about 200 KiB a call.
constexpr double kEmptyChance = 0.02;
constexpr double kMediumChance = 0.10;  // 64 KiB .. 4 MiB
constexpr double kLargeChance = 0.004;  // 4 MiB .. max_bytes
constexpr size_t kSmallTop = size_t{64} << 10;
constexpr size_t kMediumTop = size_t{4} << 20;

constexpr double kSingleCallChance = 0.55;  // else 2-4 calls in flight
constexpr double kBlockingTailChance = 0.3;  // a multi-call batch ends with a blocking call

enum class Blocking { kYes, kNo, kEither };

bool has_in_place_form(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
    case Kind::kReduce:
    case Kind::kBroadcast:
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kGather:
    case Kind::kScatter: return true;
    default: return false;
  }
}

bool is_collective(Kind kind) { return static_cast<int>(kind) <= static_cast<int>(Kind::kBarrier); }

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce: return "allreduce";
    case Kind::kReduce: return "reduce";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kAllGather: return "allgather";
    case Kind::kReduceScatter: return "reducescatter";
    case Kind::kGather: return "gather";
    case Kind::kScatter: return "scatter";
    case Kind::kAllToAll: return "alltoall";
    case Kind::kAllToAllv: return "alltoallv";
    case Kind::kBarrier: return "barrier";
    case Kind::kSendRecv: return "send/recv (group)";
    case Kind::kIsendIrecv: return "isend/irecv";
    case Kind::kTagged: return "isend/irecv tagged";
    case Kind::kSplit: return "destroy+split";
  }
  return "?";
}

bool takes_op(Kind kind) { return kind == Kind::kAllReduce || kind == Kind::kReduce || kind == Kind::kReduceScatter; }

bool is_point_to_point(Kind kind) {
  return kind == Kind::kSendRecv || kind == Kind::kIsendIrecv || kind == Kind::kTagged;
}

const char* comm_name(int comm) {
  switch (comm) {
    case kWorld: return "world";
    case kDup: return "dup";
    case kHalf: return "half";
    case kReversed: return "reversed";
    default: return "?";
  }
}

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = seed = mix(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

Planner::Planner(PlanOptions options) : options_(std::move(options)), rng_(options_.seed ^ 0x50414b53ull) {}

size_t Planner::draw_bytes(size_t capacity) {
  const double u = rng_.unit();
  if (u < kEmptyChance || capacity == 0) return 0;
  size_t lo = 1, hi = kSmallTop;
  if (u < kEmptyChance + kLargeChance) {
    lo = kMediumTop, hi = options_.max_bytes;
  } else if (u < kEmptyChance + kLargeChance + kMediumChance) {
    lo = kSmallTop, hi = kMediumTop;
  }
  hi = std::min(hi, capacity);
  lo = std::min(lo, hi);
  const double log_bytes = std::log(static_cast<double>(lo)) +
                           rng_.unit() * (std::log(static_cast<double>(hi)) - std::log(static_cast<double>(lo)));
  return std::min(hi, static_cast<size_t>(std::exp(log_bytes)));
}

Call Planner::draw_call(int slot, bool may_block, bool may_split) {
  Call call;
  call.index = next_index_++;
  call.slot = slot;
  if (may_split && rng_.chance(options_.split_chance)) {
    call.kind = Kind::kSplit;
    call.comm = kReversed;
    return call;
  }
  const Blocking blocking = may_block ? (rng_.chance(0.5) ? Blocking::kYes : Blocking::kEither) : Blocking::kNo;
  do {
    call.kind = static_cast<Kind>(rng_.below(static_cast<uint64_t>(Kind::kSplit)));
    // kSendRecv is the only blocking point-to-point kind, i-forms the only non-blocking ones.
  } while ((blocking == Blocking::kNo && call.kind == Kind::kSendRecv) ||
           (blocking == Blocking::kYes && is_point_to_point(call.kind) && call.kind != Kind::kSendRecv));
  call.comm = static_cast<int>(rng_.below(kNumComms));
  if (is_collective(call.kind)) {
    call.async = blocking == Blocking::kNo || (blocking == Blocking::kEither && rng_.chance(0.5));
  } else {
    call.async = call.kind != Kind::kSendRecv;
  }
  call.in_place = has_in_place_form(call.kind) && rng_.chance(0.5);
  call.dtype = static_cast<rrDataType_t>(rng_.below(rrNumTypes));
  if (takes_op(call.kind)) {
    call.op = static_cast<rrRedOp_t>(rng_.below(is_float(call.dtype) ? rrBand : rrNumOps));
  }
  call.root_draw = rng_.next();
  call.bytes = call.kind == Kind::kBarrier ? 0 : draw_bytes(options_.slot_bytes[static_cast<size_t>(slot)]);
  call.detail = rng_.next();
  return call;
}

Batch Planner::next() {
  Batch batch;
  if (sweep_ < static_cast<int>(Kind::kSplit)) {
    Call call;
    call.index = next_index_++;
    call.kind = static_cast<Kind>(sweep_);
    call.async = is_collective(call.kind) ? (sweep_ % 2 == 1) : call.kind != Kind::kSendRecv;
    call.bytes = options_.slot_bytes[0];
    call.detail = mix(call.index);
    ++sweep_;
    batch.calls.push_back(call);
    batch.last_blocking = !call.async;
    if (call.async) batch.wait_order.push_back(0);
    return batch;
  }
  const int slots = static_cast<int>(options_.slot_bytes.size());
  const int width = (rng_.chance(kSingleCallChance) || slots < 2) ? 1 : 2 + static_cast<int>(rng_.below(3));
  const int calls = std::min(width, slots);
  if (calls == 1) {
    batch.calls.push_back(draw_call(0, true, true));
    batch.last_blocking = !batch.calls[0].async && batch.calls[0].kind != Kind::kSplit;
    if (batch.calls[0].async) batch.wait_order.push_back(0);
    return batch;
  }
  batch.last_blocking = rng_.chance(kBlockingTailChance);
  for (int s = 0; s < calls; ++s) {
    const bool blocking_tail = batch.last_blocking && s == calls - 1;
    Call call = draw_call(s, blocking_tail, false);
    if (blocking_tail && call.async) {
      batch.last_blocking = false;  // drew the non-blocking choice: the batch has no blocking tail
    }
    batch.calls.push_back(call);
    if (call.async) batch.wait_order.push_back(s);
  }
  // Waits in any order: a Fisher-Yates shuffle.
  for (size_t i = batch.wait_order.size(); i > 1; --i) {
    std::swap(batch.wait_order[i - 1], batch.wait_order[rng_.below(i)]);
  }
  return batch;
}

}  // namespace soak
