// The communicator's calls on the same-host board: the one-shot allreduce
// (and barrier), the argument check of every other collective, and
// recursive doubling's announcement of its frames. The schedule is
// coll/one_shot.hpp's; this prepares it and runs it (exec::drive) as a part
// of the call, marking the communicator unusable when it failed.

#include "comm/communicator.hpp"

namespace rr {

Status Communicator::run_on_board(coll::OneShot::Kind kind, const exec::Call& call, const wire::OpHeader& header) {
  one_shot_->prepare(kind, call, header);
  return fail_operation(exec::drive(*one_shot_, exec::named_by_the_algorithm(), one_shot_->call(), transport_.get()));
}

Status Communicator::announce(const exec::Call& call, const wire::OpHeader& header) {
  if (!one_shot_) return Status::Ok();
  return run_on_board(coll::OneShot::Kind::kAnnounce, call, header);
}

Status Communicator::agree_on_board(const exec::Call& call, const wire::OpHeader& mine) {
  return run_on_board(coll::OneShot::Kind::kCheck, call, mine);
}

Status Communicator::allreduce_one_shot(exec::Call& call, const wire::OpHeader& header) {
  call.schedule = algo::Schedule::kOneShot;
  return run_on_board(coll::OneShot::Kind::kAllreduce, call, header);
}

}  // namespace rr
