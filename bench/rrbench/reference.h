// Inputs and the reference results the -c check compares against. Every rank
// can generate every rank's input element by element, so each rank checks its
// own result without gathering anything, and the reference is computed in
// double (exact modular arithmetic for integers), apart from the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dtype.h"

namespace rrbench {

// Element `index` of `rank`'s input, exactly representable in `type`: random
// in [-100, 100) for floats ([0.5, 1.5) for prod, so products stay finite),
// the full range of 8-bit integers (sums and products wrap), bounded ranges
// of wider ones.
double input_value(DataType type, RedOp op, int rank, std::size_t index, uint64_t seed);

// The exact result of reducing `values[0..n)` with `op` in `type`, and the
// tolerance a correct implementation may differ by: 0 for integers, max and
// min; (n + 1) roundings for float sum/avg/prod (one per ring step and one
// for the final rounding or division).
struct Expected {
  double value;
  double tolerance;
};
Expected reduce_reference(DataType type, RedOp op, const double* values, int n);

// Whether `got` matches. NaN never matches.
inline bool matches(double got, const Expected& expected) {
  const double diff = got - expected.value;
  return (diff <= expected.tolerance && -diff <= expected.tolerance) || got == expected.value;
}

}  // namespace rrbench
