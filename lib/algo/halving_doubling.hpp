#pragma once
// Rabenseifner's allreduce as pure arithmetic: a reduce-scatter by recursive
// halving, then an all-gather by recursive doubling, among the largest power
// of two P <= N ranks; the others fold in first and take the result back, as
// in recursive doubling (algo/recursive_doubling.hpp, whose fold this uses).
// A rank that takes part sends 2(P-1)/P of the buffer in 2 log2 P messages:
// the ring's bytes in twice recursive doubling's number of steps, for the
// sizes between the two (algo/select.hpp chooses).
//
// The buffer is P blocks (algo::split). Reduce-scatter round k, 0 <= k <
// log2 P: virtual rank v swaps with v ^ d, d = P >> (k + 1); of the aligned
// range of P >> k blocks it holds, it keeps the half on its side of bit d,
// sends the other half and adds the partner's copy of the half it keeps.
// After the last round v holds block v, reduced over every rank. All-gather
// round k: v swaps with v ^ (1 << k) the aligned 2^k blocks each holds.

#include "algo/recursive_doubling.hpp"

namespace rr::algo {

class HalvingDoubling {
 public:
  struct Blocks {
    int first = 0;  // [first, last) of the P blocks
    int last = 0;
  };

  HalvingDoubling(int nranks, int rank) : fold_(nranks, rank) {}

  // The fold, as recursive doubling's.
  int sits_out_for() const { return fold_.sits_out_for(); }
  int folds_in() const { return fold_.folds_in(); }
  int blocks() const { return fold_.pow2(); }  // P
  // Rounds of each half (0 when this rank sits out).
  int rounds() const { return fold_.rounds(); }

  // Reduce-scatter round k: the partner, the blocks sent, the blocks kept.
  int scatter_partner(int k) const { return fold_.real(v() ^ scatter_distance(k)); }
  Blocks scatter_send(int k) const {
    const Blocks held = aligned(blocks() >> k);
    const int d = scatter_distance(k);
    return v() & d ? Blocks{held.first, held.first + d} : Blocks{held.first + d, held.last};
  }
  Blocks scatter_keep(int k) const {
    const Blocks held = aligned(blocks() >> k);
    const int d = scatter_distance(k);
    return v() & d ? Blocks{held.first + d, held.last} : Blocks{held.first, held.first + d};
  }

  // All-gather round k: the partner, the blocks sent (held), the blocks received.
  int gather_partner(int k) const { return fold_.real(v() ^ (1 << k)); }
  Blocks gather_send(int k) const { return aligned(1 << k); }
  Blocks gather_recv(int k) const {
    const int other = v() ^ (1 << k);
    const int first = other / (1 << k) * (1 << k);
    return Blocks{first, first + (1 << k)};
  }

 private:
  int v() const { return fold_.virtual_rank(); }
  int scatter_distance(int k) const { return blocks() >> (k + 1); }
  // The aligned range of `size` blocks that holds block v.
  Blocks aligned(int size) const {
    const int first = v() / size * size;
    return Blocks{first, first + size};
  }

  RecursiveDoubling fold_;
};

}  // namespace rr::algo
