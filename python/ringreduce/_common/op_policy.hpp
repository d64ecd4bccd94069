#pragma once
// The reduce-op policy of both Python extensions (ringreduce._core for NumPy
// buffers, ringreduce._torch for tensors): the engine op an op the caller
// named becomes for a kind of element, or why it does not apply. Each
// binding says it in its own words (the op's and the type's names as its
// users know them) around the reason given here.

#include <ringreduce/ringreduce.h>

namespace ringreduce_bindings {

enum class ElementKind { kBool, kInteger, kFloat, kComplex };

struct OpChoice {
  rrRedOp_t op;          // what the engine runs; meaningless when refused
  const char* refused;   // null, or why `op` does not apply to the elements
};

// bool reduces logically on 0/1 bytes: sum, max and bor are or (the engine's
// max), prod, min and band are and (its min), bxor is xor (its bxor); avg
// has no logical meaning. Bitwise ops are for integers and bool; complex
// numbers have no order and reduce with sum and avg (the engine sees them
// as pairs of reals, which a product would multiply pairwise).
inline OpChoice choose_op(rrRedOp_t requested, ElementKind kind) {
  const bool bitwise = requested == rrBand || requested == rrBor || requested == rrBxor;
  switch (kind) {
    case ElementKind::kBool:
      switch (requested) {
        case rrSum: case rrMax: case rrBor: return {rrMax, nullptr};
        case rrProd: case rrMin: case rrBand: return {rrMin, nullptr};
        case rrAvg:
          return {requested, "bool reduces logically: sum, max and bor are or; prod, min and band are and; "
                             "bxor is xor"};
        default: return {requested, nullptr};
      }
    case ElementKind::kInteger: return {requested, nullptr};
    case ElementKind::kFloat:
      if (bitwise) return {requested, "bitwise ops are for integer and bool types"};
      return {requested, nullptr};
    case ElementKind::kComplex:
      if (bitwise) return {requested, "bitwise ops are for integer and bool types"};
      if (requested == rrMax || requested == rrMin) return {requested, "complex numbers have no order"};
      if (requested == rrProd) return {requested, "complex reduces with sum and avg"};
      return {requested, nullptr};
  }
  return {requested, nullptr};
}

}  // namespace ringreduce_bindings
