// The direct collectives' calls: gather, scatter, all-to-all and
// all-to-all-v, each checked (agree, and all-to-all-v's counts), then planned
// as one batch of sends and receives (coll/direct.hpp) and run.

#include <string>

#include "coll/direct.hpp"
#include "comm/communicator.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr {

namespace {

// "all-to-all-v #7: rank 0 sends 3 elements to rank 2 (its sendcounts[2]),
// but rank 2 expects 2 (its recvcounts[0])"; built only on a mismatch.
Status count_mismatch(const exec::Call& call, int from, int to, uint64_t sends, uint64_t expects) {
  const std::string f = std::to_string(from), t = std::to_string(to);
  return call.error(Code::kInvalidUsage, "rank " + f + " sends " + std::to_string(sends) + " elements to rank " + t +
                                             " (its sendcounts[" + t + "]), but rank " + t + " expects " +
                                             std::to_string(expects) + " (its recvcounts[" + f + "])");
}

}  // namespace

Status Communicator::gather(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  exec::Call call = issue(exec::Collective::kGather, send, recv, count, dtype, rrSum, root);
  RR_RETURN_IF_ERROR(agree(call));
  call.schedule = algo::Schedule::kDirect;
  coll::plan_gather(call, rank_, size_, batch_.get());
  return run_batch(*batch_, call);
}

Status Communicator::scatter(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  exec::Call call = issue(exec::Collective::kScatter, send, recv, count, dtype, rrSum, root);
  RR_RETURN_IF_ERROR(agree(call));
  call.schedule = algo::Schedule::kDirect;
  coll::plan_scatter(call, rank_, size_, batch_.get());
  return run_batch(*batch_, call);
}

Status Communicator::all_to_all(const void* send, void* recv, size_t count, rrDataType_t dtype) {
  RR_RETURN_IF_ERROR(check_usable());
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  exec::Call call = issue(exec::Collective::kAllToAll, send, recv, count, dtype);
  RR_RETURN_IF_ERROR(agree(call));
  call.schedule = algo::Schedule::kDirect;
  coll::plan_all_to_all(call, rank_, size_, batch_.get());
  return run_batch(*batch_, call);
}

Status Communicator::agree_counts(const exec::Call& call, const size_t* sendcounts, const size_t* recvcounts) {
  // Each peer gets what this rank sends it and expects from it, and answers
  // in kind, so both ranks of a pair that disagree see it before any data
  // moves (the others then hear it from them). The same sequence as the
  // operation header, at the header step's next column.
  const uint64_t tag = exec::collective_tag(call.sequence, exec::kHeaderStep, 1);
  const size_t pair_bytes = 2 * sizeof(uint64_t);  // native order: every host we run on is little-endian
  for (int p = 0; p < size_; ++p) {
    const size_t k = 2 * static_cast<size_t>(p);
    counts_out_[k] = sendcounts[p];
    counts_out_[k + 1] = recvcounts[p];
    if (p == rank_) continue;
    batch_->add_recv(p, tag, &counts_in_[k], pair_bytes);
    batch_->add_send(p, tag, &counts_out_[k], pair_bytes);
  }
  static const std::string kName = "all-to-all-v count check";  // no allocation per call
  Status exchanged = batch_->run(kName, deadline(), this);
  batch_->clear();
  if (!exchanged.ok()) return fail_operation(exchanged);
  auto mismatch = [&](int from, int to, uint64_t sends, uint64_t expects) {
    return fail_operation(count_mismatch(call, from, to, sends, expects), wire::NoticeKind::kMismatch);
  };
  for (int p = 0; p < size_; ++p) {
    const size_t k = 2 * static_cast<size_t>(p);
    if (p == rank_) continue;
    if (counts_in_[k] != recvcounts[p]) return mismatch(p, rank_, counts_in_[k], recvcounts[p]);
    if (counts_in_[k + 1] != sendcounts[p]) return mismatch(rank_, p, sendcounts[p], counts_in_[k + 1]);
  }
  return Status::Ok();
}

Status Communicator::all_to_all_v(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                                  const size_t* recvcounts, const size_t* rdispls, rrDataType_t dtype) {
  RR_RETURN_IF_ERROR(check_usable());
  // No local no-op, even when every count here is 0: a peer may still
  // expect something from this rank, and must hear that it gets nothing.
  // Its header's count is 0: the counts are compared pairwise.
  exec::Call call = issue(exec::Collective::kAllToAllv, send, recv, 0, dtype);
  if (size_ > 1) {
    RR_RETURN_IF_ERROR(agree(call));
    if (settings_.check_arguments) RR_RETURN_IF_ERROR(agree_counts(call, sendcounts, recvcounts));
  }
  const size_t self = static_cast<size_t>(rank_);
  if (sendcounts[self] != recvcounts[self]) {
    Status mismatch = count_mismatch(call, rank_, rank_, sendcounts[self], recvcounts[self]);
    // The others are waiting for this rank's blocks: they hear why not.
    return size_ > 1 ? fail_operation(mismatch, wire::NoticeKind::kMismatch) : mismatch;
  }
  call.schedule = algo::Schedule::kDirect;
  coll::plan_all_to_all_v(call, sendcounts, sdispls, recvcounts, rdispls, rank_, size_, batch_.get());
  return run_batch(*batch_, call);
}

}  // namespace rr
