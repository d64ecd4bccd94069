#pragma once
// Allreduce by recursive doubling (algo/recursive_doubling.hpp) as an
// algorithm object (exec/algorithm.hpp): the latency path, for messages the
// model (algo/select.hpp) finds faster there than on the ring; barrier runs
// it too, as a one-byte max. Each step is one batch of transfers; progress()
// finishes a step (checks the frame, reduces) and posts the next.
//
// Each message is a frame: the call's operation header, then the data, so
// the messages carry the argument check (no round trip before the data).
// Frames go out of staging slot 1 (its header written once) and come into
// slot 0, which takes any frame up to a slot: a peer that called something
// else is then named by its header, whatever the length of what it sent. A
// message longer than a slot holds goes in slot-sized pieces, one after
// another; the piece is the tag's column.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/recursive_doubling.hpp"
#include "coll/batch_steps.hpp"
#include "exec/call.hpp"
#include "exec/wire.hpp"
#include "memory/staging_pool.hpp"

namespace rr::coll {

class RecursiveDoubling final : public BatchSteps {
 public:
  // `check_arguments`: RR_CHECK_ARGUMENTS (a peer's frame header must then
  // equal this rank's; its length must fit either way).
  RecursiveDoubling(transport::Transport* transport, memory::StagingPool* pool, int rank, int size,
                    bool check_arguments);

  // The call to run next (its header, the peers' frames are compared with),
  // before exec::drive() runs it. The output holds the result once it ends.
  void prepare(const exec::Call& call, const wire::OpHeader& header);

  Status post(const std::string& what) override;
  Status progress(const std::string& what, exec::Round* round) override;

 private:
  std::string step_note() const override;

  // What one step of a piece does.
  enum class Kind : uint8_t {
    kHandOver,  // send the input to the partner that adds it (this rank sits out)
    kTakeBack,  // receive the result from it
    kFoldIn,    // receive the input of the rank that sits out, and add it
    kExchange,  // swap with the round's partner, and add
    kFoldOut,   // send the result to the rank that sat out
  };
  struct Step {
    Kind kind;
    int peer;
    int tag_step;  // the tag's step (the first message of a piece 0 takes the header's)
  };

  // Adds the transfers of steps_[step_] of piece piece_ and posts them.
  Status start_step(const std::string& what);
  // After they completed: checks a received frame, then copies or adds it.
  Status finish_step(const std::string& what);
  // The frame of `got` bytes from `peer` should hold `bytes` of data.
  Status check_frame(const std::string& what, int peer, size_t got, size_t bytes) const;
  uint64_t tag(int step) const;

  memory::StagingPool* pool_;
  const int rank_;
  const int size_;
  const bool check_arguments_;
  const algo::RecursiveDoubling plan_;
  // Every piece takes the same steps: at most a fold, log2(kMaxRanks) = 15
  // rounds, and a fold back.
  std::array<Step, 17> steps_{};
  size_t nsteps_ = 0;

  // The call.
  exec::Call call_;
  wire::OpHeader header_;
  size_t elem_ = 0;
  size_t piece_elems_ = 0;
  // Where it is: the piece (its first element) and the step.
  size_t piece_ = 0;
  size_t first_ = 0;
  size_t step_ = 0;
  bool ended_ = false;  // no step left to post
};

}  // namespace rr::coll
