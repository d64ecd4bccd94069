#pragma once
// What a rank does with one chunk at one step of a pipelined schedule, named
// as NCCL's ring primitives are. The schedules (algo/ring.hpp,
// algo/chain.hpp) say which primitive each step is; the executors
// (exec/primitives.hpp carries a primitive out on a chunk's buffers) differ
// only in where the chunk arrives and from where the right neighbour is sent
// it, which is how bytes move, not what the step does.
//
//   send                 this rank's input goes to the right
//   copySend             ... and is kept in the output too (broadcast's root, out of place)
//   recvReduceSend       input op arrived goes to the right: a partial result
//   recvReduceCopySend   input op arrived is final: kept in the output and sent on
//   recvReduceCopy       input op arrived is final: kept in the output, the chunk's last hop
//   recvCopySend         arrived is kept in the output and sent on
//   recv                 arrived is kept in the output, the chunk's last hop
//
// A step that makes a final result (recvReduceCopy*) also finishes rrAvg.

#include <cstdint>

namespace rr::algo {

enum class Primitive : uint8_t {
  kSend,
  kCopySend,
  kRecvReduceSend,
  kRecvReduceCopySend,
  kRecvReduceCopy,
  kRecvCopySend,
  kRecv,
};

// NCCL's names: "recvReduceCopySend", ...
const char* primitive_name(Primitive p);

// Whether the step takes a chunk from the left neighbour.
constexpr bool receives(Primitive p) { return p != Primitive::kSend && p != Primitive::kCopySend; }
// ... combines it with this rank's input.
constexpr bool reduces(Primitive p) {
  return p == Primitive::kRecvReduceSend || p == Primitive::kRecvReduceCopySend || p == Primitive::kRecvReduceCopy;
}
// ... writes the output (the chunk there is final).
constexpr bool keeps(Primitive p) {
  return p != Primitive::kSend && p != Primitive::kRecvReduceSend;
}
// ... sends a chunk to the right neighbour.
constexpr bool forwards(Primitive p) {
  return p != Primitive::kRecvReduceCopy && p != Primitive::kRecv;
}
// ... makes the chunk's final reduction (rrAvg divides here).
constexpr bool finishes(Primitive p) { return reduces(p) && keeps(p); }

}  // namespace rr::algo
