#pragma once
// Allreduce by recursive halving and doubling (algo/halving_doubling.hpp) as
// an algorithm object (exec/algorithm.hpp): the middle sizes, where the
// ring's 2(N - 1) steps cost more than its bytes and recursive doubling's
// whole-buffer messages more than their count. The argument check has
// already run (the communicator's agree()). The partner's half arrives in
// staging-slot pieces and is reduced from the slot; the all-gather receives
// straight into the output. Each step (a piece of a reducing swap, a whole
// swap, a hand-over) is one batch; progress() finishes one and posts the next.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/halving_doubling.hpp"
#include "algo/ring.hpp"
#include "coll/batch_steps.hpp"
#include "exec/call.hpp"
#include "memory/staging_pool.hpp"

namespace rr::coll {

class HalvingDoubling final : public BatchSteps {
 public:
  HalvingDoubling(transport::Transport* transport, memory::StagingPool* pool, int rank, int size);

  // The call to run next, before exec::drive() runs it.
  void prepare(const exec::Call& call);

  Status post(const std::string& what) override;
  Status progress(const std::string& what, exec::Round* round) override;

 private:
  std::string step_note() const override;

  enum class Kind : uint8_t {
    kHandOver,     // send the whole input, in slot-sized pieces (this rank sits out)
    kTakeBack,     // receive the whole result in one message
    kFoldIn,       // receive the input of the rank that sits out, piece by piece, and add it
    kScatter,      // reduce-scatter round k: swap halves, adding the partner's piece by piece
    kGather,       // all-gather round k: swap the reduced blocks, straight into the output
    kFoldOut,      // send the whole result to the rank that sat out
  };
  struct Step {
    Kind kind;
    int peer;
    int tag_step;
    int round;  // k, for kScatter and kGather
  };

  // The elements a step sends and receives.
  algo::Range sent(const Step& step) const;
  algo::Range received(const Step& step) const;
  // Pieces of a reducing step (kFoldIn, kScatter); 1 for the others.
  size_t pieces(const Step& step) const;
  bool reducing(const Step& step) const { return step.kind == Kind::kFoldIn || step.kind == Kind::kScatter; }
  // Elements [first, last) of a range of blocks.
  algo::Range elements(algo::HalvingDoubling::Blocks b) const;
  // Adds the transfers of piece piece_ of steps_[step_] and posts them.
  Status start_piece(const std::string& what);
  // After a piece's batch completed: adds the partner's piece, where the step reduces.
  void finish_piece();
  // Moves to the next piece or step with any transfers; false when none is left.
  bool advance();

  memory::StagingPool* pool_;
  const int size_;
  const algo::HalvingDoubling plan_;
  // At most a fold, 15 rounds of each half (kMaxRanks = 2^15) and a fold back.
  std::array<Step, 32> steps_{};
  size_t nsteps_ = 0;

  exec::Call call_;
  size_t elem_ = 0;
  size_t piece_elems_ = 0;
  size_t step_ = 0;
  size_t piece_ = 0;
  bool ended_ = false;  // no step left to post
};

}  // namespace rr::coll
