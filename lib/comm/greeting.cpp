// The greeting that ends a communicator's setup (Communicator::greet_neighbours):
// one byte each way with both neighbours, so that every connection to them
// has finished its handshake before the communicator is handed out.

#include <string>

#include "comm/communicator.hpp"
#include "comm/idle_progress.hpp"
#include "exec/batch.hpp"
#include "exec/tags.hpp"

namespace rr {

Status Communicator::greet_neighbours(exec::Clock::time_point until) {
  if (size_ == 1) return Status::Ok();
  const int left = (rank_ + size_ - 1) % size_;
  const int right = (rank_ + 1) % size_;
  // Hear from both, speak to both: a rank that heard a neighbour has sent
  // everything that neighbour's handshake waits for, so either may leave
  // first. A batch of its own: its sends go to a live neighbour even when
  // the other is known gone (post_past_lost_peers), so that the live one
  // fails at once too instead of waiting out the deadline for this rank.
  exec::Batch greeting(transport_.get());
  greeting.post_past_lost_peers();
  greeting.add_recv(left, exec::kGreetingTag, header_left_, 1);
  if (right != left) greeting.add_recv(right, exec::kGreetingTag, header_right_, 1);
  greeting.add_send(right, exec::kGreetingTag, header_out_, 1);
  if (right != left) greeting.add_send(left, exec::kGreetingTag, header_out_, 1);
  // Deaf to notices: a neighbour that was greeted may be in its first call
  // already, and a notice about that call (a mismatch, say) is for this
  // rank's first call too, not for its setup; it waits in the inbox. A
  // shrink that makes this communicator may end the wait, though (its
  // watch: another survivor left the shrink, and will not greet).
  static const std::string kName = "connection setup";
  const Status greeted = greeting.run(kName, until, setup_watch_);
  if (!greeted.ok()) return fail_operation(greeted);
  // From now on, what its calls leave in the transport moves while no call
  // uses it (comm/idle_progress.hpp).
  idle_progress::add(this);
  return Status::Ok();
}

}  // namespace rr
