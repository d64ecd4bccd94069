#include "exec/column_loop.hpp"

#include "exec/algorithm.hpp"

namespace rr::exec {

// One run of a ColumnLoop as an Algorithm: the columns started, the slots
// advanced round by round, the executor's words for a stall.
class ColumnLoop::Columns final : public Algorithm {
 public:
  Columns(ColumnLoop* loop, transport::Transport* transport, size_t depth, size_t total, int left, int right)
      : loop_(loop), transport_(transport), depth_(depth), total_(total), left_(left), right_(right) {}

  Status post(const std::string&) override {
    loop_->done_ = 0;
    for (size_t slot = 0; slot < depth_ && next_ < total_; ++slot) {
      Status started = loop_->start(slot, next_++);
      if (!started.ok()) {
        loop_->drain();
        return started;
      }
    }
    return Status::Ok();
  }

  Status progress(const std::string&, Round* round) override {
    // UCX may be busy with wire-up, keepalives or partial transfers: that
    // alone is not the call moving (it must not hide a dead peer or the deadline).
    round->transport_moved = transport_->progress();
    for (size_t slot = 0; slot < depth_; ++slot) {
      if (!loop_->active(slot)) continue;
      bool chunk_moved = false;
      bool finished = false;
      RR_RETURN_IF_ERROR(loop_->advance(slot, &chunk_moved, &finished));
      round->moved |= chunk_moved || finished;
      if (finished) {
        ++loop_->done_;
        if (next_ < total_) RR_RETURN_IF_ERROR(loop_->start(slot, next_++));
      }
    }
    round->done = loop_->done_ == total_;
    return Status::Ok();
  }

  void needs(int* from, int* to) const override {
    bool need_left = false;
    bool need_right = false;
    loop_->needs(next_ < total_, &need_left, &need_right);
    *from = need_left ? left_ : -1;
    *to = need_right ? right_ : -1;
  }

  // The executor names the call itself (Call::label) with the chunk, step and peer.
  Status stalled(const std::string&, Code code, int failed_peer, const std::string& cause) const override {
    return loop_->describe_stall(code, failed_peer, cause);
  }

  void cancel() override { loop_->drain(); }

 private:
  ColumnLoop* loop_;
  transport::Transport* transport_;
  const size_t depth_;
  const size_t total_;
  const int left_;
  const int right_;
  size_t next_ = 0;  // the next column to start
};

Status ColumnLoop::run_columns(transport::Transport* transport, Call& call, size_t depth, size_t total,
                               int left, int right) {
  Columns columns(this, transport, depth, total, left, right);
  return drive(columns, named_by_the_algorithm(), call, transport);
}

}  // namespace rr::exec
