#pragma once
// The 48 tag bits the transport leaves to us (it adds the source rank above):
//
//   [p2p : 1][op sequence : 7][step : 16][column : 24]
//
// Point-to-point messages set the top bit and nothing else, so messages
// between one pair match in the order they were sent, as torch.distributed
// and MPI promise. Collectives carry the communicator's operation sequence,
// so a late message of one call can never match the next.
//
// Two more kinds use tags neither of those can have: notices (the control
// channel, kControlTag) and each collective's operation header (its own
// sequence, at step kHeaderStep, which no schedule reaches: a ring of at most
// 2^15 ranks has fewer than 2^16 - 1 steps, the chain and the trees use step 0).

#include <cstddef>
#include <cstdint>

namespace rr::exec {

constexpr uint64_t kColumnBits = 24;
constexpr uint64_t kStepBits = 16;
constexpr uint64_t kSequenceBits = 7;
constexpr uint64_t kP2pTag = uint64_t{1} << (kColumnBits + kStepBits + kSequenceBits);
constexpr uint64_t kControlTag = kP2pTag | 1;
constexpr int kHeaderStep = (1 << kStepBits) - 1;

constexpr uint64_t collective_tag(uint64_t sequence, int step, size_t column) {
  return ((sequence & ((uint64_t{1} << kSequenceBits) - 1)) << (kColumnBits + kStepBits)) |
         ((static_cast<uint64_t>(step) & ((uint64_t{1} << kStepBits) - 1)) << kColumnBits) |
         (column & ((uint64_t{1} << kColumnBits) - 1));
}

}  // namespace rr::exec
