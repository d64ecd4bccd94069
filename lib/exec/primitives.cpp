#include "exec/primitives.hpp"

#include <cstring>

#include "exec/reducer.hpp"
#include "reduce/reduce.hpp"
#include "reduce/stream_copy.hpp"

namespace rr::exec {

namespace {

// Nothing to copy where the places are one buffer, there is no such place,
// or the chunk is empty (an empty chunk's places may be null, which memcpy
// may not be given even for zero bytes). True when it copied.
bool copy(void* dst, const void* src, size_t bytes, bool stream = false) {
  if (bytes == 0 || dst == src || dst == nullptr) return false;
  if (stream) {
    reduce::stream_copy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
  return true;
}

}  // namespace

Status run_primitive(algo::Primitive p, const Call& call, int nranks, const ChunkPlaces& at, Traffic* traffic) {
  using algo::Primitive;
  const size_t bytes = at.count * reduce::dtype_size(call.dtype);
  Traffic moved;
  if (algo::reduces(p)) {
    // The result goes where it is sent on from (a partial result always is;
    // over UCX that is the output), else into the output. A final result
    // sent on is then copied to the output, if that is another place: the
    // sent copy stays in the caches, the output is written once.
    const bool last = algo::finishes(p);
    const bool forwarded = algo::forwards(p);
    void* dst = forwarded ? at.forward : at.keep;
    if (call.reducer) {
      RR_RETURN_IF_ERROR(call.reducer->reduce(dst, at.mine, at.arrived, at.count, call.dtype, call.op, last, nranks));
    } else if (last) {
      reduce::reduce_last(dst, at.mine, at.arrived, at.count, call.dtype, call.op, nranks);
    } else {
      reduce::reduce(dst, at.mine, at.arrived, at.count, call.dtype, call.op);
    }
    moved.buffer_read = bytes;
    moved.shared_read = bytes;
    moved.reduced = bytes;
    (forwarded ? moved.shared_written : moved.buffer_written) = bytes;
    if (p == Primitive::kRecvReduceCopySend && copy(at.keep, at.forward, bytes, at.stream_keep)) {
      moved.shared_read += bytes;
      moved.buffer_written += bytes;
    }
  } else {
    // Copies only: what is passed on is this rank's input or what arrived.
    const bool received = algo::receives(p);
    const void* chunk = received ? at.arrived : at.mine;
    uint64_t& read = received ? moved.shared_read : moved.buffer_read;
    if (algo::keeps(p) && copy(at.keep, chunk, bytes, at.stream_keep)) {
      read += bytes;
      moved.buffer_written += bytes;
    }
    if (algo::forwards(p) && copy(at.forward, chunk, bytes)) {
      read += bytes;
      moved.shared_written += bytes;
    }
  }
  if (traffic) {
    traffic->buffer_read += moved.buffer_read;
    traffic->buffer_written += moved.buffer_written;
    traffic->shared_read += moved.shared_read;
    traffic->shared_written += moved.shared_written;
    traffic->reduced += moved.reduced;
  }
  return Status::Ok();
}

RingBuffers::RingBuffers(const algo::RingSchedule& schedule, const Call& call)
    : schedule_(&schedule),
      send_(static_cast<const uint8_t*>(call.send)),
      mine_(static_cast<const uint8_t*>(call.reducer ? call.reduce_source : call.send)),
      recv_(static_cast<uint8_t*>(call.recv)),
      elem_(reduce::dtype_size(call.dtype)) {}

}  // namespace rr::exec
