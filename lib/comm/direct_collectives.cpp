// The direct collectives: gather, scatter and all-to-all, each one batch of
// sends and receives posted at once (exec/batch.hpp), tagged with the
// operation's sequence number.

#include <cstring>
#include <string>

#include "comm/communicator.hpp"
#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr {

Status Communicator::gather(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  RR_RETURN_IF_ERROR(check_peer("rrGather", "root", root));
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  RR_RETURN_IF_ERROR(agree(wire::Collective::kGather, count, dtype, rrSum, root));
  const uint64_t tag = exec::collective_tag(sequence_++, 0, 0);
  if (rank_ != root) {
    batch_->add_send(root, tag, send, bytes);
  } else {
    uint8_t* out = static_cast<uint8_t*>(recv);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) {
        if (out + static_cast<size_t>(peer) * bytes != send) std::memcpy(out + static_cast<size_t>(peer) * bytes, send, bytes);
      } else {
        batch_->add_recv(peer, tag, out + static_cast<size_t>(peer) * bytes, bytes);
      }
    }
  }
  return run_batch(*batch_, "gather #" + std::to_string(sequence_ - 1));
}

Status Communicator::scatter(const void* send, void* recv, size_t count, rrDataType_t dtype, int root) {
  RR_RETURN_IF_ERROR(check_usable());
  RR_RETURN_IF_ERROR(check_peer("rrScatter", "root", root));
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  RR_RETURN_IF_ERROR(agree(wire::Collective::kScatter, count, dtype, rrSum, root));
  const uint64_t tag = exec::collective_tag(sequence_++, 0, 0);
  if (rank_ != root) {
    batch_->add_recv(root, tag, recv, bytes);
  } else {
    const uint8_t* in = static_cast<const uint8_t*>(send);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) {
        if (in + static_cast<size_t>(peer) * bytes != recv) std::memcpy(recv, in + static_cast<size_t>(peer) * bytes, bytes);
      } else {
        batch_->add_send(peer, tag, in + static_cast<size_t>(peer) * bytes, bytes);
      }
    }
  }
  return run_batch(*batch_, "scatter #" + std::to_string(sequence_ - 1));
}

Status Communicator::all_to_all(const void* send, void* recv, size_t count, rrDataType_t dtype) {
  RR_RETURN_IF_ERROR(check_usable());
  const size_t bytes = count * reduce::dtype_size(dtype);
  if (bytes == 0) return Status::Ok();
  RR_RETURN_IF_ERROR(agree(wire::Collective::kAllToAll, count, dtype, rrSum, -1));
  const uint64_t tag = exec::collective_tag(sequence_++, 0, 0);
  const uint8_t* in = static_cast<const uint8_t*>(send);
  uint8_t* out = static_cast<uint8_t*>(recv);
  std::memcpy(out + static_cast<size_t>(rank_) * bytes, in + static_cast<size_t>(rank_) * bytes, bytes);
  // Start with the nearest peers on the ring so ranks do not all hit rank 0 at once.
  for (int d = 1; d < size_; ++d) {
    const int to = (rank_ + d) % size_;
    const int from = (rank_ - d + size_) % size_;
    batch_->add_recv(from, tag, out + static_cast<size_t>(from) * bytes, bytes);
    batch_->add_send(to, tag, in + static_cast<size_t>(to) * bytes, bytes);
  }
  return run_batch(*batch_, "all-to-all #" + std::to_string(sequence_ - 1));
}

}  // namespace rr
