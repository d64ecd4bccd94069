#pragma once
// What the algorithms that run one batch per step (recursive doubling,
// halving-doubling, the binomial trees) share: the batch of the step in
// flight, whose pending transfers name the peers the call needs (in turn)
// and word its stall, with the algorithm's own "step 2 of 3" beside it.

#include <string>

#include "exec/algorithm.hpp"
#include "exec/batch.hpp"

namespace rr::coll {

class BatchSteps : public exec::Algorithm {
 public:
  void needs(int* from, int* to) const final { batch_.needs(from, to); }
  Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const final {
    return batch_.stalled_at(what, step_note(), code, cause, failed_peer);
  }
  void cancel() final { batch_.cancel(); }

 protected:
  explicit BatchSteps(transport::Transport* transport) : batch_(transport) {}
  // Where the call is, for a stall: "piece 1 of 2, step 3 of 4".
  virtual std::string step_note() const = 0;
  // One round of the step in flight. *ended once its batch completed: the
  // round then says that the call moved, not that it is done (the algorithm
  // says that, once no step is left).
  Status progress_step(const std::string& what, exec::Round* round, bool* ended) {
    RR_RETURN_IF_ERROR(batch_.progress(what, round));
    *ended = round->done;
    if (*ended) {
      round->done = false;
      round->moved = true;
    }
    return Status::Ok();
  }

  exec::Batch batch_;  // the step in flight
};

}  // namespace rr::coll
