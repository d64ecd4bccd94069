#pragma once
// The soak's sequence of operations: every rank draws the same batches from
// the same seed, so every rank issues the same calls in the same order on
// each communicator without telling the others anything.
//
// A batch is one call (blocking, or Async and waited at once), or 2-4
// non-blocking calls (Async collectives, rrIsend/rrIrecv, tagged) on any of
// the communicators, issued together, perhaps followed by one blocking call,
// then waited in a drawn order: several communicators have work in flight at
// once.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace soak {

enum class Kind {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kGather,
  kScatter,
  kAllToAll,
  kAllToAllv,
  kBarrier,
  kSendRecv,    // rrSend / rrRecv between rrGroupStart and rrGroupEnd (blocking)
  kIsendIrecv,  // rrIsend / rrIrecv, waited with rrWait
  kTagged,      // rrIsendTag / rrIrecvTag, some from RR_ANY_SOURCE, waited with rrWaitStatus
  kSplit,       // rrCommDestroy of the churned communicator and rrCommSplit of a new one
};
constexpr int kNumKinds = static_cast<int>(Kind::kSplit) + 1;
const char* kind_name(Kind kind);
bool takes_op(Kind kind);
bool is_point_to_point(Kind kind);

// The communicators every rank holds. The churned one is destroyed and split
// again from time to time (Kind::kSplit); the others live for the whole run.
enum CommId {
  kWorld,     // rrCommInitFromEnv
  kDup,       // rrCommSplit(world, 0, rank): the same ranks on a transport of its own
  kHalf,      // rrCommSplit(world, 2 * rank < n ? 0 : 1, rank): two halves, run side by side
  kReversed,  // rrCommSplit(world, 0, n - 1 - rank): the world in reverse order, churned
  kNumComms,
};
const char* comm_name(int comm);

struct Call {
  uint64_t index = 0;  // position in the whole sequence: names the call and keys its inputs
  Kind kind = Kind::kBarrier;
  int comm = kWorld;
  bool async = false;     // collectives: the ...Async form, finished by rrWait
  bool in_place = false;  // where the collective has an in-place form
  rrDataType_t dtype = rrFloat32;
  rrRedOp_t op = rrSum;
  uint64_t root_draw = 0;  // root = root_draw % (communicator size)
  size_t bytes = 0;        // the largest buffer of the call, on each rank
  int slot = 0;            // whose buffers it uses (one slot per call in flight)
  uint64_t detail = 0;     // seeds the call's own details: message counts, tags, orders
};

struct Batch {
  std::vector<Call> calls;
  bool last_blocking = false;  // the last call is blocking (issued after the others, before the waits)
  std::vector<int> wait_order;  // positions in calls, for the non-blocking ones
};

// xoshiro256**: small, fast, and the same on every rank.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t s_[4];
};

struct PlanOptions {
  uint64_t seed = 1;
  size_t max_bytes = size_t{64} << 20;
  std::vector<size_t> slot_bytes;  // capacity of each slot's buffers
  double split_chance = 1.0 / 1500;  // per single-call batch: how often the churned communicator is remade
};

class Planner {
 public:
  explicit Planner(PlanOptions options);
  // The warm-up's first batches: every kind once at its slot's largest size
  // on the world (so the largest buffers every path touches are in RSS before
  // the baseline is taken), then the drawn sequence.
  Batch next();
  uint64_t calls_drawn() const { return next_index_; }

 private:
  Call draw_call(int slot, bool may_block, bool may_split);
  size_t draw_bytes(size_t capacity);

  PlanOptions options_;
  Rng rng_;
  uint64_t next_index_ = 0;
  int sweep_ = 0;  // kinds of the opening sweep done so far
};

}  // namespace soak
