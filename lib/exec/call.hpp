#pragma once
// One collective call, as the communicator issued it: what it is (the
// collective and the communicator's sequence number, which tag its
// messages), its arguments, its deadline and what may interrupt it, and the
// schedule that runs it. Every executor runs a Call; the argument check
// sends it as a wire header (exec/wire.hpp); every error about it starts
// with its name, "allreduce #7", made here and nowhere else.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "algo/schedule.hpp"
#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::exec {

class Interrupt;  // exec/wait_policy.hpp
class Reducer;    // exec/reducer.hpp

using Clock = std::chrono::steady_clock;

// The collectives, numbered as the wire header carries them (a byte; 0 is
// none).
enum class Collective : uint8_t {
  kAllReduce = 1,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kAllToAll,
  kBarrier,
  kAllToAllv,  // count 0 in its header: the counts differ by rank and are compared pairwise
  kLast = kAllToAllv,
};
// "allreduce", "reduce-scatter", ...
const char* collective_name(Collective c);
// "allreduce #7": how every message names a call.
std::string call_name(Collective c, uint64_t sequence);

struct Call {
  Collective collective = Collective::kAllReduce;
  uint64_t sequence = 0;  // the communicator's operation number
  // The schedule that runs it, for messages that say how (algo/schedule.hpp:
  // "one-shot", "binomial tree", ...); kNone until chosen.
  algo::Schedule schedule = algo::Schedule::kNone;

  // Buffers, as the collective reads them. The ring, by its phases: both
  // (allreduce) send and recv hold all `count` elements; reduce-scatter:
  // send all, recv this rank's segment; all-gather: send this rank's
  // segment, recv all. The chain: broadcast's send is the root's data and
  // recv every rank's output; reduce's send every rank's input and recv
  // the root's result.
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements as the caller passed them, as the wire header carries them
  // (reduce-scatter: each rank's segment; all-gather: each rank's part; the
  // ring's schedule holds the whole buffer's).
  size_t count = 0;
  rrDataType_t dtype = rrFloat32;
  rrRedOp_t op = rrSum;  // rrSum where the collective does not reduce
  int root = -1;         // -1 where the collective has none

  // The deadline: set when the call is issued, or (deadline left at zero)
  // `timeout` from the first wait that asks until() (the one-shot board,
  // whose calls mostly never wait, reads no clock then).
  Clock::time_point deadline{};
  std::chrono::milliseconds timeout{0};
  Interrupt* interrupt = nullptr;  // checked whenever the call stalls

  // The ring's reductions (exec/reducer.hpp): null, on the host with this
  // rank's values read from send; else by `reducer`, with them read from
  // reduce_source (laid out as send).
  Reducer* reducer = nullptr;
  const void* reduce_source = nullptr;
  // The ring order (nranks entries, algo/ring_order.hpp), or null: rank
  // order. The ring and the chain run along it.
  const int* order = nullptr;

  Clock::time_point until();
  // "allreduce #7"
  std::string name() const;
  // "allreduce #7 (one-shot)"; name() while no schedule is set.
  std::string label() const;
  // label() into *out, reusing its storage (a call's hot path allocates nothing).
  void write_label(std::string* out) const;
  // A status of `code` saying name() + ": " + text.
  Status error(Code code, std::string_view text) const;
};

}  // namespace rr::exec
