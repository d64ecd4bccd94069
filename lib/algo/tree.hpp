#pragma once
// A binomial tree rooted anywhere, for small broadcasts and reduces: the
// latency is ceil(log2 N) hops instead of the chain's N - 1.
//
// Ranks are renumbered relative to the root (v = rank - root mod N). The
// parent of v clears v's lowest set bit; the children of v are v + 2^k for
// every 2^k below v's lowest set bit (all powers below N for the root).

#include <vector>

namespace rr::algo {

class BinomialTree {
 public:
  BinomialTree(int nranks, int rank, int root) : nranks_(nranks), rank_(rank), root_(root) {}

  // -1 for the root.
  int parent() const {
    const int v = relative(rank_);
    if (v == 0) return -1;
    return absolute(v & (v - 1));
  }

  // Largest subtree first: the order a broadcast should feed them in.
  std::vector<int> children() const {
    std::vector<int> out;
    children(&out);
    return out;
  }
  // The same into *out, reusing its storage (a call's path allocates nothing).
  void children(std::vector<int>* out) const {
    out->clear();
    const int v = relative(rank_);
    const int limit = v == 0 ? nranks_ : (v & -v);
    int bit = 1;
    while (bit < limit && v + bit < nranks_) bit <<= 1;
    for (bit >>= 1; bit > 0; bit >>= 1) {
      if (bit < limit && v + bit < nranks_) out->push_back(absolute(v + bit));
    }
  }

 private:
  int relative(int r) const { return (r - root_ + nranks_) % nranks_; }
  int absolute(int v) const { return (v + root_) % nranks_; }

  int nranks_;
  int rank_;
  int root_;
};

}  // namespace rr::algo
