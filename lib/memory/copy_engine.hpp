#pragma once
// The copies of the staging pipeline (comm/staged_collectives.hpp) behind one
// small interface, so the pipeline is the same code with or without a GPU.
//
// Three lanes: device-to-host, host-to-device and reductions. Each runs what
// was issued on it one after the other, in issue order, while the caller
// goes on:
//   copy(lane, c)            a copy;
//   record(lane, m)          marker m completes (for later after(), wait());
//   after(lane, m)           later work waits for marker m as last recorded
//                            before this call (a dependency the engine sees);
//   signal(lane, n)          the arrival count becomes n (the host reads it);
//   wait_release(lane, n)    later work waits until the host released n.
// The host side: arrived() / wait_arrived(n) read the arrival count, release(n)
// moves the release count forward (never back), wait(m) blocks on a marker.
//
// Deadlock freedom: a GPU may run two streams in one hardware queue (more
// streams than CUDA_DEVICE_MAX_CONNECTIONS, or that variable at 1), where
// whatever was issued later waits behind a wait_release that has not passed.
// The pipeline therefore issues work only in an order every dependency
// respects: a wait_release(n) only after the signals the host needs before
// it releases n, an after(m) only after its record. Then lanes that share a
// queue only serialize; they never wait on each other in a cycle.
// tests/unit/host_copy_engine_test and the staging tests run the pipeline
// with both lanes in one queue to hold this.
//
// Issuing may itself block: a CUDA stream holds only so many operations not
// yet run, and a launch onto a full one waits until the GPU ran some. So the
// host side that releases a call's waits must be able to run while that
// call is being issued (on another thread), never only after it. The host
// engine bounds its lanes the same way (`capacity`) to hold this in tests.
//
// Two engines: CudaCopyEngine (memory/cuda_copy_engine.hpp: copy streams,
// events as markers, counters in mapped pinned memory written and waited
// for by stream memory operations or one-thread kernels; CUDA build only) and HostCopyEngine
// (memory/host_copy_engine.hpp: "device" memory is plain memory and a thread
// per lane does the work), which the tests run the pipeline on.

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::memory {

// kReduce runs the reduction servers (serve_reductions).
enum class Lane { kToHost, kToDevice, kReduce };

// One reduction a server runs: dst = mine op arrived for `count` elements;
// with `last`, rrAvg also divides by `divisor`.
struct Reduction {
  void* dst = nullptr;
  const void* mine = nullptr;
  const void* arrived = nullptr;
  size_t count = 0;
  bool last = false;
  int divisor = 1;
};

// `rows` rows of `width` bytes: row r is read at src + r * src_pitch and
// written at dst + r * dst_pitch (a contiguous copy is one row).
struct Copy {
  void* dst = nullptr;
  size_t dst_pitch = 0;
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t width = 0;
  size_t rows = 0;
};

inline Copy contiguous(void* dst, const void* src, size_t bytes) { return Copy{dst, bytes, src, bytes, bytes, 1}; }

// Whether a counter at `counter` lets a wait for `count` pass, as the GPU
// compares (cuStreamWaitValue64 with CU_STREAM_WAIT_VALUE_GEQ: cyclic, so a
// counter 2^63 or more past the count does not): never release more than
// was handed out.
inline bool reached(uint64_t counter, uint64_t count) { return static_cast<int64_t>(counter - count) >= 0; }

class CopyEngine {
 public:
  // Markers per engine.
  static constexpr int kMarkers = 8;

  virtual ~CopyEngine() = default;

  // Makes `slots` staging slots of at least `slot_bytes` each, once: a pool
  // already that large is kept. Not while copies are in flight.
  virtual Status reserve_slots(size_t slot_bytes, size_t slots) = 0;
  virtual void* slot(size_t index) const = 0;
  virtual size_t slots() const = 0;

  // Lane work, in issue order per lane (see above). Not ok only when
  // nothing was issued.
  virtual Status copy(Lane lane, const Copy& copy) = 0;
  virtual Status record(Lane lane, int marker) = 0;
  virtual Status after(Lane lane, int marker) = 0;
  virtual Status signal(Lane lane, uint64_t count) = 0;
  virtual Status wait_release(Lane lane, uint64_t count) = 0;
  // A server of segment `count` (kernels/reduce_server.hpp): it runs the
  // reductions of `dtype` and `op` the host posts for that segment, one at a
  // time, until the host ends the segment or posts one of a later segment.
  virtual Status serve_reductions(Lane lane, uint64_t count, rrDataType_t dtype, rrRedOp_t op) = 0;

  // Host side.
  // The largest count a lane signalled.
  virtual uint64_t arrived() const = 0;
  // Blocks until arrived() >= count. A lane that failed (a copy the GPU
  // refused) is reported here, naming it; so is `give_up` returning true
  // (it is asked every few milliseconds), as Code::kInvalidUsage.
  virtual Status wait_arrived(uint64_t count, const std::function<bool()>& give_up) = 0;
  // Lets lane work waiting for a count up to `count` go on.
  virtual void release(uint64_t count) = 0;
  // Runs `reduction` on the server of segment `count` and waits until it is
  // done: Timeout after `timeout_ms`; a failed lane and `give_up` as for
  // wait_arrived. One at a time.
  virtual Status post_reduction(uint64_t count, const Reduction& reduction, int timeout_ms,
                                const std::function<bool()>& give_up) = 0;
  // The servers of segments up to `count` exit once idle.
  virtual void end_reductions(uint64_t count) = 0;
  // Blocks until `marker` completed (at once for one never recorded).
  virtual Status wait(int marker) = 0;

  // Hands out `n` counts for signals and releases, the first of them
  // returned: the counts of every user of the engine, in issue order.
  uint64_t take_counts(uint64_t n) {
    const uint64_t first = issued_ + 1;
    issued_ += n;
    return first;
  }
  // The last count handed out: releasing it lets every lane finish.
  uint64_t issued() const { return issued_; }

 private:
  uint64_t issued_ = 0;  // the last count handed out
};

}  // namespace rr::memory
