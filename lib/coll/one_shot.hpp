#pragma once
// The one-shot schedules on the same-host board (transport/shm/board.hpp,
// exec/board_executor.hpp) as an algorithm object (exec/algorithm.hpp):
// each rank publishes its call's header and its buffer once, and every rank
// reads every other's where it lies. An allreduce is then one hand-over
// whatever the rank count, where recursive doubling needs log2(N) round
// trips through UCX; each rank reduces the N buffers in rank order, so every
// rank gets the same bits. A call larger than a publication (RR_ALGO=oneshot
// forces any size) goes in publications of the board's capacity, one after
// another.
//
// The argument check rides in the publications: a peer's header that
// differs is named as recursive doubling's frames name it. Every other
// collective checks its arguments on the board too (kCheck: its header,
// published without data, read by both ring neighbours, one hand-over
// instead of a round trip through UCX), and recursive doubling announces
// its header there before its frames go (kAnnounce): so a rank waiting on
// the board for a peer that called something else reads what it called
// instead of waiting out the timeout; that rank fails, and its notice ends
// the peer's wait. What a header-only publication announces is its length:
// a check, or frames sent through UCX.
//
// A call that finds its peers' parts already there neither reads the clock
// nor formats a string (exec::drive starts the deadline at the first wait);
// progress() reads each part as it is published, in rank order.

#include <cstddef>
#include <cstdint>
#include <string>

#include "exec/algorithm.hpp"
#include "exec/board_executor.hpp"
#include "exec/call.hpp"
#include "exec/wire.hpp"

namespace rr::coll {

class OneShot final : public exec::Algorithm, private exec::Sleeper {
 public:
  // `check_arguments`: RR_CHECK_ARGUMENTS (a peer's header must then equal
  // this rank's; what it publishes must hold what this rank's does either way).
  OneShot(exec::BoardExecutor* board, int size, bool check_arguments);

  enum class Kind : uint8_t {
    kAllreduce,  // call.send's data, reduced into call.recv from every rank's part
    kCheck,      // the header only, read by both ring neighbours (agree())
    kAnnounce,   // the header only, read by nobody: this rank sends frames through UCX
  };
  // The call to run next, published with `header`, before exec::drive()
  // runs it. kCheck and kAnnounce name their call "allreduce #7 (argument
  // check)" after the header's words.
  void prepare(Kind kind, const exec::Call& call, const wire::OpHeader& header);
  // The call as prepared (its deadline, once drive() started one).
  exec::Call& call() { return call_; }

  Status post(const std::string& what) override;
  Status progress(const std::string& what, exec::Round* round) override;
  void needs(int* from, int* to) const override;
  Status stalled(const std::string& what, Code code, int failed_peer, const std::string& cause) const override;
  void cancel() override {}  // nothing is in flight: a publication is there or not
  exec::Sleeper* sleeper() override { return this; }

 private:
  // progress() past a still round: publishes, reads and reduces as far as
  // the peers' publications allow.
  [[gnu::noinline]] Status advance(exec::Round* round);
  // Writes and publishes this rank's part of the piece at first_.
  void publish_piece();
  // Reads and takes `peer`'s part (it is there): checks its header, reduces.
  Status take(int peer, const uint8_t* buffer, uint32_t bytes);
  // A wait for `peer` (`claiming`: for its previous publication) begins:
  // true when its first look (BoardExecutor::poll) found the publication
  // there; false when it had looked already, or found nothing (then the
  // poll was the wait's spin: round->spun).
  bool first_look(int peer, bool claiming, exec::Round* round);
  // The round stops at the wait first_look() began: it progresses the
  // transport when StillRounds says (exec/algorithm.hpp).
  Status still(exec::Round* round) {
    if (round->moved) {
      still_rounds_.moved();
    } else if (still_rounds_.transport_due()) {
      round->transport_moved |= board_->transport()->progress();
    }
    return Status::Ok();
  }
  // The i-th rank whose part this rank reads: every rank in rank order
  // (its own included), or its two ring neighbours (one on 2 ranks).
  int reader(size_t i) const;
  // `peer`'s publication of `bytes` should hold what this rank's does.
  Status check_publication(int peer, const uint8_t* buffer, uint32_t bytes) const;

  // Sleeper: on the flag of the peer the round stopped at.
  void sleep(int timeout_ms) override {
    if (waiting_ >= 0) board_->sleep(waiting_, claiming_, timeout_ms);
  }

  exec::BoardExecutor* board_;
  const int rank_;
  const int size_;
  const bool check_arguments_;

  // The call.
  Kind kind_ = Kind::kAllreduce;
  exec::Call call_;
  wire::OpHeader header_;
  size_t elem_ = 0;
  size_t piece_elems_ = 0;
  size_t readers_ = 0;      // how many parts reader() names
  uint32_t expected_ = 0;   // what a peer's publication of the piece says of its length
  // Where it is: the piece (its first element and length), whether this
  // rank published its part, the next part to read, the one read first.
  size_t first_ = 0;
  size_t piece_ = 0;
  bool published_ = false;
  size_t next_reader_ = 0;
  const uint8_t* mine_ = nullptr;      // this rank's publication
  const uint8_t* previous_ = nullptr;  // rank 0's part, until rank 1's is reduced with it
  bool ended_ = false;
  // The wait it stopped at.
  int waiting_ = -1;
  bool claiming_ = false;
  bool polled_ = false;  // the wait's first look (BoardExecutor::poll) was taken
  exec::StillRounds still_rounds_;
};

}  // namespace rr::coll
