#include "exec/primitives.hpp"

#include <cstring>

#include "exec/reducer.hpp"
#include "reduce/reduce.hpp"

namespace rr::exec {

namespace {

// Nothing to copy where the places are one buffer, there is no such place,
// or the chunk is empty (an empty chunk's places may be null, which memcpy
// may not be given even for zero bytes).
void copy(void* dst, const void* src, size_t bytes) {
  if (bytes != 0 && dst != src && dst != nullptr) std::memcpy(dst, src, bytes);
}

}  // namespace

Status run_primitive(algo::Primitive p, const Call& call, int nranks, const ChunkPlaces& at) {
  using algo::Primitive;
  const size_t bytes = at.count * reduce::dtype_size(call.dtype);
  if (algo::reduces(p)) {
    // A partial result is reduced where it is sent from; a final one into
    // the output, then copied to where it is sent from, if that differs.
    const bool last = algo::finishes(p);
    void* dst = last ? at.keep : at.forward;
    if (call.reducer) {
      RR_RETURN_IF_ERROR(call.reducer->reduce(dst, at.mine, at.arrived, at.count, call.dtype, call.op, last, nranks));
    } else if (last) {
      reduce::reduce_last(dst, at.mine, at.arrived, at.count, call.dtype, call.op, nranks);
    } else {
      reduce::reduce(dst, at.mine, at.arrived, at.count, call.dtype, call.op);
    }
    if (p == Primitive::kRecvReduceCopySend) copy(at.forward, at.keep, bytes);
    return Status::Ok();
  }
  // Copies only: what is passed on is this rank's input or what arrived.
  const void* chunk = algo::receives(p) ? at.arrived : at.mine;
  if (algo::keeps(p)) copy(at.keep, chunk, bytes);
  if (algo::forwards(p)) copy(at.forward, chunk, bytes);
  return Status::Ok();
}

RingBuffers::RingBuffers(const algo::RingSchedule& schedule, const Call& call)
    : schedule_(&schedule),
      send_(static_cast<const uint8_t*>(call.send)),
      mine_(static_cast<const uint8_t*>(call.reducer ? call.reduce_source : call.send)),
      recv_(static_cast<uint8_t*>(call.recv)),
      elem_(reduce::dtype_size(call.dtype)) {}

}  // namespace rr::exec
