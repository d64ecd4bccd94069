#pragma once
// Recursive doubling allreduce as pure arithmetic: ceil(log2 N) exchanges
// of the whole buffer (plus two for a rank count that is not a power of
// two), against the ring's 2(N - 1) steps of 1/N of it. Latency-bound
// messages take it; the ring keeps the large ones (algo/select.hpp).
//
// With P the largest power of two <= N and R = N - P, the first 2R ranks
// fold in pairs before the exchanges: even rank r hands its input to r + 1
// and sits out; odd rank r adds it and takes part as virtual rank r / 2.
// Ranks from 2R on take part as r - R. In round k virtual rank v swaps the
// whole buffer with v ^ 2^k and both reduce; afterwards each odd folding
// rank hands the result back to its even partner. Partners reduce the same
// two values each round, and the ops commute, so every rank ends with the
// same bits.

namespace rr::algo {

class RecursiveDoubling {
 public:
  RecursiveDoubling(int nranks, int rank) : nranks_(nranks), rank_(rank) {
    while (pow2_ * 2 <= nranks_) pow2_ *= 2;
    rem_ = nranks_ - pow2_;
    for (int p = 1; p < pow2_; p *= 2) ++log2_;
  }

  // An even rank of a folded pair: the odd rank it hands its input to and
  // gets the result from; -1 for every other rank.
  int sits_out_for() const { return rank_ < 2 * rem_ && rank_ % 2 == 0 ? rank_ + 1 : -1; }
  // An odd rank of a folded pair: the even rank whose input it adds first
  // and hands the result to; -1 for every other rank.
  int folds_in() const { return rank_ < 2 * rem_ && rank_ % 2 == 1 ? rank_ - 1 : -1; }

  // Exchanges this rank takes part in (0 when it sits out).
  int rounds() const { return sits_out_for() >= 0 ? 0 : log2_; }
  // The rank this one swaps buffers with in `round` (0 <= round < rounds()).
  int partner(int round) const { return real(virtual_rank() ^ (1 << round)); }

  // Messages of the whole buffer this rank sends (the transport's bytes
  // counters, divided by the buffer's size, must show exactly this).
  int messages_sent() const { return sits_out_for() >= 0 ? 1 : rounds() + (folds_in() >= 0 ? 1 : 0); }

  // The power of two that takes part, this rank's place among those (for a
  // rank that sits out: its odd partner's), and the rank at virtual rank v.
  int pow2() const { return pow2_; }
  int virtual_rank() const { return rank_ < 2 * rem_ ? rank_ / 2 : rank_ - rem_; }
  int real(int v) const { return v < rem_ ? 2 * v + 1 : v + rem_; }

 private:

  int nranks_;
  int rank_;
  int pow2_ = 1;
  int rem_ = 0;
  int log2_ = 0;
};

}  // namespace rr::algo
