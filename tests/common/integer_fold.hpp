#pragma once
// The reference for an integer reduction over ranks, as the engine defines
// it: sums and products modular in the type's width (64-bit arithmetic,
// then truncated), bitwise ops, exact max and min, and avg the truncated
// quotient of the wrapped sum. Public header only, so that references
// outside the engine (tests/soak) share it with those inside.

#include <ringreduce/ringreduce.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace rr::test {

// op over input(0) .. input(ranks - 1), each a T.
template <typename T, typename Input>
T fold_integers(rrRedOp_t op, int ranks, Input input) {
  static_assert(std::is_integral_v<T>, "integer types only");
  using U = std::make_unsigned_t<T>;
  T best = input(0);
  uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(best));
  for (int r = 1; r < ranks; ++r) {
    const T x = input(r);
    const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(x));
    if (op == rrSum || op == rrAvg) acc += u;
    if (op == rrProd) acc *= u;
    if (op == rrBand) acc &= u;
    if (op == rrBor) acc |= u;
    if (op == rrBxor) acc ^= u;
    if (op == rrMax) best = std::max(best, x);
    if (op == rrMin) best = std::min(best, x);
  }
  if (op == rrMax || op == rrMin) return best;
  const T wrapped = static_cast<T>(static_cast<U>(acc));
  if (op == rrAvg) return static_cast<T>(wrapped / static_cast<T>(ranks));
  return wrapped;
}

}  // namespace rr::test
