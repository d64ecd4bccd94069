// dist.all_reduce of a sparse COO tensor (DDP's buckets for
// nn.Embedding(sparse=True)), with Gloo's result: every rank's coalesced
// indices and values gathered in rank order, added as sparse tensors in that
// order, coalesced, and copied into the input tensor, where DDP and the
// future read it.
//
// Two engine calls. An all-gather of each rank's description (nnz, sparse
// and dense dims, sizes, dtype), which every rank checks against rank 0's
// alike, so that a mismatch fails everywhere with the same words; then one
// all-to-all-v that carries each rank's indices and values, as bytes (any
// dtype moves), to every rank, in blocks sized from the descriptions. Between
// the two the issue lock is let go, so abort() and getError() answer at once,
// but no other collective is issued (issue_paused_): the engine's order stays
// the same on every rank.

#include "process_group.hpp"

#include <ATen/core/LegacyTypeDispatch.h>

#include <cstring>
#include <string>
#include <utility>

#include "errors.hpp"
#include "tensors.hpp"

namespace ringreduce_torch {

namespace {

// A description is one row of int64: these fields, then the sizes.
constexpr int64_t kMaxDims = 64;
enum Field : int64_t { kNnz, kSparseDim, kDenseDim, kDtype, kNdim, kSizes, kFields = kSizes + kMaxDims };

// Blocks start 16-byte aligned so that every dtype's values can be viewed in
// place in the bytes received.
int64_t padded(int64_t bytes) { return (bytes + 15) / 16 * 16; }

std::string describe(const int64_t* row) {
  std::string s = "sizes [";
  for (int64_t d = 0; d < row[kNdim] && d < kMaxDims; ++d) s += (d ? ", " : "") + std::to_string(row[kSizes + d]);
  return s + "], sparse_dim " + std::to_string(row[kSparseDim]) + ", dtype " +
         c10::toString(static_cast<at::ScalarType>(row[kDtype]));
}

// Throws, the same on every rank, unless every rank described a tensor of
// rank 0's sizes, dims and dtype.
void check_alike(const char* op_name, const at::Tensor& table) {
  const int64_t* first = table[0].data_ptr<int64_t>();
  for (int64_t p = 0; p < table.size(0); ++p) {
    const int64_t* row = table[p].data_ptr<int64_t>();
    if (row[kNdim] > kMaxDims) {
      throw invalid_argument(op_name, "rank " + std::to_string(p) + "'s sparse tensor has " +
                                          std::to_string(row[kNdim]) + " dimensions, more than the " +
                                          std::to_string(kMaxDims) + " supported");
    }
    if (std::memcmp(row + kSparseDim, first + kSparseDim, (kFields - kSparseDim) * sizeof(int64_t)) != 0) {
      throw invalid_argument(op_name, "sparse tensors differ across ranks: rank " + std::to_string(p) + "'s has " +
                                          describe(row) + ", rank 0's " + describe(first));
    }
  }
}

// Where rank p's bytes lie in its block: indices (int64, sparse_dim x nnz),
// then values (nnz x the dense sizes).
struct Block {
  int64_t index_bytes = 0;
  int64_t value_bytes = 0;
  int64_t size() const { return padded(index_bytes) + padded(value_bytes); }
};

Block block_of(int64_t nnz, int64_t sparse_dim, int64_t dense_numel, int64_t element_size) {
  return Block{nnz * sparse_dim * static_cast<int64_t>(sizeof(int64_t)), nnz * dense_numel * element_size};
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupRingreduce::sparse_allreduce(std::vector<at::Tensor>& tensors,
                                                                        const c10d::AllreduceOptions& opts) {
  static constexpr const char* kOp = "allreduce";
  const at::Tensor user = tensors[0];
  if (!user.device().is_cpu()) {
    throw invalid_argument(kOp, "sparse tensors on device " + user.device().str() + " are not supported; CPU ones are");
  }
  if (opts.reduceOp != c10d::ReduceOp::SUM) {
    throw invalid_argument(kOp,
                           std::string("sparse tensors reduce with SUM only, not ") + reduce_op_name(opts.reduceOp));
  }
  at::Tensor input;
  {
    at::AutoDispatchBelowAutograd no_autograd;  // as Gloo: a gradient, not a variable to record
    input = user.coalesce();
  }
  const int64_t sparse_dim = input.sparse_dim();
  const std::vector<int64_t> sizes = input.sizes().vec();
  std::vector<int64_t> value_shape(sizes.begin() + sparse_dim, sizes.end());
  int64_t dense_numel = 1;
  for (int64_t s : value_shape) dense_numel *= s;
  const int64_t element_size = static_cast<int64_t>(input.element_size());

  at::Tensor mine = at::zeros({kFields}, at::kLong);
  int64_t* row = mine.data_ptr<int64_t>();
  row[kNnz] = input._nnz();
  row[kSparseDim] = sparse_dim;
  row[kDenseDim] = input.dense_dim();
  row[kDtype] = static_cast<int64_t>(input.scalar_type());
  row[kNdim] = input.dim();
  for (int64_t d = 0; d < input.dim() && d < kMaxDims; ++d) row[kSizes + d] = sizes[d];
  at::Tensor table = at::empty({size_, kFields}, at::kLong);

  std::unique_lock<std::mutex> lock = lock_issue();
  check_open(kOp);
  rrRequest_t described = nullptr;
  check_result(rrAllGatherAsync(mine.data_ptr(), table.data_ptr(), kFields, rrInt64, comm_, &described), kOp);
  rrResult_t described_result = rrSuccess;
  {
    issue_paused_ = true;
    lock.unlock();
    described_result = rrWait(described);
    lock.lock();
    issue_paused_ = false;
    issue_resumed_.notify_all();
  }
  if (described_result != rrSuccess) throw engine_error(described_result, kOp);
  check_alike(kOp, table);

  std::vector<int64_t> nnz(static_cast<size_t>(size_));
  std::vector<size_t> recv_counts(nnz.size()), recv_displs(nnz.size());
  int64_t received = 0;
  const int64_t* rows = table.data_ptr<int64_t>();
  for (int p = 0; p < size_; ++p) {
    nnz[p] = rows[p * kFields + kNnz];
    const int64_t bytes = block_of(nnz[p], sparse_dim, dense_numel, element_size).size();
    recv_counts[p] = static_cast<size_t>(bytes);
    recv_displs[p] = static_cast<size_t>(received);
    received += bytes;
  }
  const Block own = block_of(row[kNnz], sparse_dim, dense_numel, element_size);
  at::Tensor send = at::zeros({own.size()}, at::kByte);
  std::memcpy(send.data_ptr(), input._indices().contiguous().data_ptr(), own.index_bytes);
  std::memcpy(static_cast<uint8_t*>(send.data_ptr()) + padded(own.index_bytes), input._values().contiguous().data_ptr(),
              own.value_bytes);
  const std::vector<size_t> send_counts(nnz.size(), static_cast<size_t>(own.size()));
  const std::vector<size_t> send_displs(nnz.size(), 0);
  at::Tensor recv = at::empty({received}, at::kByte);

  auto sum = [user, recv, nnz, recv_displs, sizes, value_shape, sparse_dim, dense_numel, element_size,
              options = input.options()] {
    at::AutoDispatchBelowAutograd no_autograd;
    at::Tensor output;
    for (size_t p = 0; p < nnz.size(); ++p) {
      const Block b = block_of(nnz[p], sparse_dim, dense_numel, element_size);
      const int64_t offset = static_cast<int64_t>(recv_displs[p]);
      at::Tensor indices = recv.narrow(0, offset, b.index_bytes).view(at::kLong).view({sparse_dim, nnz[p]});
      std::vector<int64_t> shape{nnz[p]};
      shape.insert(shape.end(), value_shape.begin(), value_shape.end());
      at::Tensor values = recv.narrow(0, offset + padded(b.index_bytes), b.value_bytes)
                              .view(options.dtype().toScalarType())
                              .view(shape);
      at::Tensor part = at::sparse_coo_tensor(indices, values, sizes, options);
      if (p == 0) {
        output = part;
      } else {
        output += part;
      }
    }
    user.copy_(output.coalesce());
  };
  auto work = c10::make_intrusive<CollectiveWork>(rank_, c10d::OpType::ALLREDUCE, kOp, "ringreduce:all_reduce_sparse",
                                                  tensors, tensors, std::vector<at::Tensor>{send, recv},
                                                  std::move(sum), hooks_);
  issue_locked(work, kOp, opts.timeout, [&](const EngineCall& c) {
    return c.call(rrAllToAllvConfig, rrAllToAllvAsyncConfig, send.data_ptr(), send_counts.data(), send_displs.data(),
                  recv.data_ptr(), recv_counts.data(), recv_displs.data(), rrUint8);
  });
  return work;
}

}  // namespace ringreduce_torch
