#pragma once
// rr-sim's model of rrCommShrinkFailed (comm/derive.cpp) at scale: the
// survivors' agreement (coll/agreement.hpp), then the shrink's exchanges.
//
// Every agreement round is an all-to-all among the survivors: each sends
// its set (12 + N/8 bytes) to every other, rank + 1 first (wrapping) as the
// engine does, so the messages of each moment form a permutation and every
// NIC carries its share at full rate: a round takes the longest of a rank's
// posting and taking its 2 (S - 1) messages (`overhead_s` each, LogP's o)
// and its host's NIC moving K (S - K) messages out (and in), plus one
// latency. (sim.hpp's first-come-first-served NICs, right for the ring's
// neighbour traffic, would serialise an all-to-all through chains of shared
// ingresses that packet interleaving does not have.) One round agrees when
// the survivors saw the same losses before they called; each rank that
// dies during the agreement, seen by some survivors and not by others,
// costs two rounds more (coll/agreement.hpp), and `detect_s` for the
// transport to report it. Then the shrink: an all-to-all of the offers
// (the list and a UCX worker address of `address_bytes`), the new
// communicator's connection and set-up (`connect_s`, a constant measured
// on one host), and an all-to-all of one-byte words; then the agreement's
// one round more that confirms nobody else failed meanwhile (counted with
// the agreement's rounds).

#include <cstddef>
#include <cstdint>

#include "sim.hpp"

namespace rrsim {

struct ShrinkModel {
  int lost = 1;               // ranks dead before the call, seen by every survivor
  int die_during = 0;         // ranks that die during the agreement
  double overhead_s = 1e-6;   // posting or taking one message, on the rank
  double detect_s = 10e-3;    // from a death to the transport reporting it
  size_t address_bytes = 240; // a UCX worker address with its header
  double connect_s = 20e-3;   // the new communicator's connection and init
};

struct ShrinkResult {
  int survivors = 0;
  int rounds = 0;
  uint64_t agreement_messages = 0;
  uint64_t agreement_bytes = 0;
  double agreement_s = 0;
  uint64_t shrink_messages = 0;
  double shrink_s = 0;          // the offers, the connection, the words
  double total_s = 0;
};

ShrinkResult simulate_shrink_failed(const Machine& m, const ShrinkModel& s);

}  // namespace rrsim
