#include "coll/direct.hpp"

#include <cstdint>
#include <cstring>

#include "exec/tags.hpp"
#include "reduce/reduce.hpp"

namespace rr::coll {

namespace {

size_t block_bytes(const exec::Call& call) { return call.count * reduce::dtype_size(call.dtype); }

}  // namespace

void plan_gather(const exec::Call& call, int rank, int size, exec::Batch* batch) {
  const size_t bytes = block_bytes(call);
  const uint64_t tag = exec::collective_tag(call.sequence, 0, 0);
  if (rank != call.root) {
    batch->add_send(call.root, tag, call.send, bytes);
    return;
  }
  uint8_t* out = static_cast<uint8_t*>(call.recv);
  for (int peer = 0; peer < size; ++peer) {
    uint8_t* block = out + static_cast<size_t>(peer) * bytes;
    if (peer != rank) {
      batch->add_recv(peer, tag, block, bytes);
    } else if (block != call.send && bytes > 0) {
      std::memcpy(block, call.send, bytes);
    }
  }
}

void plan_scatter(const exec::Call& call, int rank, int size, exec::Batch* batch) {
  const size_t bytes = block_bytes(call);
  const uint64_t tag = exec::collective_tag(call.sequence, 0, 0);
  if (rank != call.root) {
    batch->add_recv(call.root, tag, call.recv, bytes);
    return;
  }
  const uint8_t* in = static_cast<const uint8_t*>(call.send);
  for (int peer = 0; peer < size; ++peer) {
    const uint8_t* block = in + static_cast<size_t>(peer) * bytes;
    if (peer != rank) {
      batch->add_send(peer, tag, block, bytes);
    } else if (block != call.recv && bytes > 0) {
      std::memcpy(call.recv, block, bytes);
    }
  }
}

void plan_all_to_all(const exec::Call& call, int rank, int size, exec::Batch* batch) {
  const size_t bytes = block_bytes(call);
  const uint64_t tag = exec::collective_tag(call.sequence, 0, 0);
  const uint8_t* in = static_cast<const uint8_t*>(call.send);
  uint8_t* out = static_cast<uint8_t*>(call.recv);
  if (bytes > 0) std::memcpy(out + static_cast<size_t>(rank) * bytes, in + static_cast<size_t>(rank) * bytes, bytes);
  for (int d = 1; d < size; ++d) {
    const int to = (rank + d) % size;
    const int from = (rank - d + size) % size;
    batch->add_recv(from, tag, out + static_cast<size_t>(from) * bytes, bytes);
    batch->add_send(to, tag, in + static_cast<size_t>(to) * bytes, bytes);
  }
}

void plan_all_to_all_v(const exec::Call& call, const size_t* sendcounts, const size_t* sdispls,
                       const size_t* recvcounts, const size_t* rdispls, int rank, int size, exec::Batch* batch) {
  const size_t elem = reduce::dtype_size(call.dtype);
  const uint8_t* in = static_cast<const uint8_t*>(call.send);
  uint8_t* out = static_cast<uint8_t*>(call.recv);
  const size_t self = static_cast<size_t>(rank);
  if (sendcounts[self] > 0) std::memcpy(out + rdispls[self] * elem, in + sdispls[self] * elem, sendcounts[self] * elem);
  const uint64_t tag = exec::collective_tag(call.sequence, 0, 0);
  for (int d = 1; d < size; ++d) {
    const size_t to = static_cast<size_t>((rank + d) % size);
    const size_t from = static_cast<size_t>((rank - d + size) % size);
    // (An empty block's displacement is not looked at: its buffer may be NULL.)
    batch->add_recv(static_cast<int>(from), tag, recvcounts[from] ? out + rdispls[from] * elem : nullptr,
                    recvcounts[from] * elem, true);
    batch->add_send(static_cast<int>(to), tag, sendcounts[to] ? in + sdispls[to] * elem : nullptr,
                    sendcounts[to] * elem, true);
  }
}

}  // namespace rr::coll
