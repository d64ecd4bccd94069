#pragma once
// The 48 tag bits the transport leaves to us (it adds the source rank above):
//
//   collectives:     [0 : 1][op sequence : 7][step : 16][column : 24]
//   point-to-point:  [1 : 1][0 : 15][user tag : 31][0 : 1]
//   notices:         [1 : 1][0 : 46][1 : 1]                    (kControlTag)
//   greeting:        [1 : 1][0 : 45][1 : 1][1 : 1]             (kGreetingTag)
//   shrink:          [1 : 1][0][epoch][1 : 1][x : 1][1 : 1]    (comm/derive.cpp: the
//                    survivors' offers, x = 0, and their word that the new
//                    communicator is made, x = 1; each shrink its own epoch)
//   agreement:       [1 : 1][0][epoch : 23][round : 20][1 : 1][0 : 1][1 : 1][1 : 1]
//                    (coll/agreement.hpp: the survivors' rounds on the failed
//                    set; each agreement of a communicator its own epoch)
//
// Point-to-point messages set the top bit and carry the caller's tag
// (0..2^31-1; untagged calls are tag 0), so messages between one pair with
// one tag match in the order they were sent, as torch.distributed and MPI
// promise, and different tags match independently. Their lowest bit is 0:
// no tag reaches the notices' (the control channel's). Collectives carry the
// communicator's operation sequence, so a late message of one call can never
// match the next.
//
// Each collective's operation header uses its own sequence at step
// kHeaderStep, which no schedule reaches: a ring of at most 2^15 ranks has
// fewer than 2^16 - 1 steps, the chain and the trees use step 0. Recursive
// doubling, whose messages carry the header ahead of the data, sends its
// first ones (the fold's and round 0's, column 0) at kHeaderStep too, so that
// a peer that called another collective finds them where it expects a header.

#include <cstddef>
#include <cstdint>

namespace rr::exec {

constexpr uint64_t kColumnBits = 24;
constexpr uint64_t kStepBits = 16;
constexpr uint64_t kSequenceBits = 7;
constexpr uint64_t kP2pTag = uint64_t{1} << (kColumnBits + kStepBits + kSequenceBits);
constexpr uint64_t kControlTag = kP2pTag | 1;
// Communicator::greet_neighbours(): once per communicator, before any call.
constexpr uint64_t kGreetingTag = kP2pTag | 3;
// rrCommShrink's exchanges among the survivors (comm/derive.cpp), the
// `epoch`-th shrink of a communicator: never a point-to-point tag (whose
// lowest bit is 0), the notices' or the greeting's.
constexpr uint64_t shrink_offer_tag(uint64_t epoch) { return kP2pTag | (epoch << 3) | 5; }
constexpr uint64_t shrink_ready_tag(uint64_t epoch) { return kP2pTag | (epoch << 3) | 7; }
// The fault-tolerant agreement's round `round` (coll/agreement.hpp) in the
// communicator's `epoch`-th agreement: its bits 0-3 (1011) are no other
// kind's (shrink: bit 2 set; greeting: bit 3 clear; notices: bit 1 clear).
constexpr uint64_t agreement_tag(uint64_t epoch, uint64_t round) {
  return kP2pTag | ((epoch & ((uint64_t{1} << 23) - 1)) << 24) | ((round & ((uint64_t{1} << 20) - 1)) << 4) | 0xb;
}
static_assert(agreement_tag(0, 0) != kGreetingTag && (agreement_tag(5, 7) & 4) == 0 && (agreement_tag(5, 7) & 8) != 0,
              "an agreement's tag is no other kind's");
// A survivor that leaves the `epoch`-th shrink failing says so to the others
// (comm/derive.cpp): bits 0-4 (10011) are no other kind's (the greeting's
// are 00011 with nothing above; shrink: 101, 111; agreement: 1011).
constexpr uint64_t shrink_leave_tag(uint64_t epoch) {
  return kP2pTag | ((epoch & ((uint64_t{1} << 41) - 1)) << 5) | 0x13;
}
static_assert(shrink_leave_tag(0) != kGreetingTag && shrink_leave_tag(0) != kControlTag &&
                  shrink_leave_tag(2) != shrink_offer_tag(4) && shrink_leave_tag(2) != shrink_ready_tag(4) &&
                  shrink_leave_tag(3) != agreement_tag(0, 6),
              "a shrink's leave word's tag is no other kind's");
constexpr int kHeaderStep = (1 << kStepBits) - 1;
// A communicator's setup messages (the same-host slot rings' offers and the
// vote on them, comm/same_host_path.cpp), sent before its first operation:
// no schedule reaches this step either (a ring's last is 2 x (2^15 - 1) - 1).
constexpr int kSetupStep = kHeaderStep - 1;
constexpr int kMaxP2pTag = 0x7fffffff;

// A point-to-point message's tag; p2p_tag(0) == kP2pTag. `tag` is 0..kMaxP2pTag.
constexpr uint64_t p2p_tag(int tag) { return kP2pTag | (static_cast<uint64_t>(static_cast<uint32_t>(tag)) << 1); }
static_assert(p2p_tag(kMaxP2pTag) < (kP2pTag << 1) && (p2p_tag(kMaxP2pTag) & 1) == 0,
              "point-to-point tags stay within the 48 bits and never reach kControlTag");

constexpr uint64_t collective_tag(uint64_t sequence, int step, size_t column) {
  return ((sequence & ((uint64_t{1} << kSequenceBits) - 1)) << (kColumnBits + kStepBits)) |
         ((static_cast<uint64_t>(step) & ((uint64_t{1} << kStepBits) - 1)) << kColumnBits) |
         (column & ((uint64_t{1} << kColumnBits) - 1));
}

// The setup messages, by number: 0-3 comm/same_host_path.cpp (the ring
// offers, the votes to rank 0, its answer, its board offer), 4-7
// comm/pipeline_sizing.cpp (ping, pong, round trips to rank 0, its depth).
constexpr uint64_t setup_tag(size_t message) { return collective_tag(0, kSetupStep, message); }

}  // namespace rr::exec
