#include "coll/binomial_tree.hpp"

#include <cstring>

#include "algo/tree.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr::coll {

BinomialTree::BinomialTree(transport::Transport* transport, memory::StagingPool* pool, int rank, int size)
    : BatchSteps(transport), pool_(pool), rank_(rank), size_(size) {
  // The root's children, the most any rank has: one per power of two below size.
  size_t most = 0;
  for (int bit = 1; bit < size; bit <<= 1) ++most;
  children_.reserve(most);
  batch_.reserve(most + 1);
}

void BinomialTree::prepare(const exec::Call& call) {
  call_ = call;
  bytes_ = call.count * reduce::dtype_size(call.dtype);
  const algo::BinomialTree tree(size_, rank_, call.root);
  parent_ = tree.parent();
  tree.children(&children_);
}

Status BinomialTree::post(const std::string& what) {
  batch_.clear();  // a failed call leaves its transfers
  const uint64_t tag = exec::collective_tag(call_.sequence, 0, 0);
  stage_ = 0;
  if (reducing()) {
    acc_ = parent_ < 0 ? call_.recv : pool_->slot(0);
    if (acc_ != call_.send && bytes_ > 0) std::memmove(acc_, call_.send, bytes_);  // no null pointer for 0 bytes
    for (size_t c = 0; c < children_.size(); ++c) batch_.add_recv(children_[c], tag, pool_->slot(c + 1), bytes_);
  } else if (parent_ >= 0) {
    batch_.add_recv(parent_, tag, call_.recv, bytes_);
  } else {
    if (call_.recv != call_.send && bytes_ > 0) std::memcpy(call_.recv, call_.send, bytes_);
  }
  return batch_.post(what);
}

Status BinomialTree::progress(const std::string& what, exec::Round* round) {
  bool ended = false;
  RR_RETURN_IF_ERROR(progress_step(what, round, &ended));
  if (!ended) return Status::Ok();
  batch_.clear();
  if (stage_ == 1) {
    stage_ = 2;
    // avg divides once, at the root
    if (reducing() && parent_ < 0) reduce::finish(call_.recv, call_.recv, call_.count, call_.dtype, call_.op, size_);
    round->done = true;
    return Status::Ok();
  }
  stage_ = 1;
  const uint64_t tag = exec::collective_tag(call_.sequence, 0, 0);
  if (reducing()) {
    for (size_t c = 0; c < children_.size(); ++c) {
      reduce::reduce(acc_, acc_, pool_->slot(c + 1), call_.count, call_.dtype, call_.op);
    }
    if (parent_ >= 0) batch_.add_send(parent_, tag, acc_, bytes_);
  } else {
    for (int child : children_) batch_.add_send(child, tag, call_.recv, bytes_);
  }
  return batch_.post(what);
}

std::string BinomialTree::step_note() const {
  return stage_ == 0 ? (reducing() ? "from the children" : "from the parent")
                     : (reducing() ? "to the parent" : "to the children");
}

}  // namespace rr::coll
