#pragma once
// A reducer (lib/exec/reducer.hpp) for the executor's tests: it reduces on
// the host, as the staging path's reduction servers do on the device, and
// counts its calls; `fail` makes every call fail.

#include <atomic>

#include "exec/reducer.hpp"
#include "reduce/reduce.hpp"

namespace rr::test {

class HostReducer : public exec::Reducer {
 public:
  explicit HostReducer(bool fail = false) : fail_(fail) {}
  HostReducer(const HostReducer& other) : fail_(other.fail_) {}

  Status reduce(void* dst, const void* mine, const void* arrived, size_t count, rrDataType_t dtype, rrRedOp_t op,
                bool last, int nranks) override {
    ++calls;
    if (fail_) return SystemError("the reducer broke");
    if (last) {
      reduce::reduce_last(dst, mine, arrived, count, dtype, op, nranks);
    } else {
      reduce::reduce(dst, mine, arrived, count, dtype, op);
    }
    return Status::Ok();
  }

  std::atomic<int> calls{0};

 private:
  bool fail_;
};

}  // namespace rr::test
