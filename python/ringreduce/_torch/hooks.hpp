#pragma once
// What torch hears of the backend's operations through hooks (torch >= 2.15,
// c10d/Hooks.hpp, where Backend.hpp defines C10D_BACKEND_HAS_HOOKS): the
// completion hooks, fired once per Work that ended successfully with its
// completion key and duration, and the abort hooks, run when the engine
// reports a timeout or a failed peer. torch's flight recorder
// (FlightRecorderHook) registers both on every group: it retires an entry
// when its completion arrives ("completed", with the duration), and writes
// its trace to disk from the abort hook.
//
// A Works calls in from the thread that learnt how it ended: the Completer's
// for collectives, whichever thread tested or waited a send or receive.
// Hooks run there, never with this table's lock held (a hook's own lock is
// taken before the table's when it unregisters) and never with the GIL taken
// for them.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

class Hooks {
 public:
  // A completion key no other Work of this process had (torch maps keys to
  // its entries and asks that none be reused).
  static uint64_t next_key();

#ifdef C10D_BACKEND_HAS_HOOKS
  void add_completion(int64_t id, c10d::CompletionHook hook);
  void remove_completion(int64_t id);
  void add_abort(int64_t id, c10d::AbortHook hook);
  void remove_abort(int64_t id);
#endif

  // A Work ended successfully after `duration_ms`: every completion hook.
  void completed(uint64_t key, float duration_ms);
  // A Work failed with `result`: on a timeout or a failed peer the abort
  // hooks run, before the failure reaches the caller (so that a process
  // that exits on the error does not end a trace half written). Once per
  // group; later failures are the same failure seen again.
  void failed(rrResult_t result);

 private:
#ifdef C10D_BACKEND_HAS_HOOKS
  std::mutex mutex_;
  std::map<int64_t, c10d::CompletionHook> completion_;
  std::map<int64_t, c10d::AbortHook> abort_;
#endif
  std::atomic<bool> aborted_{false};
};

}  // namespace ringreduce_torch
