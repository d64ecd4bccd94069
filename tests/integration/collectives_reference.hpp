#pragma once
// collectives_test's dtypes, ops and names, and its checks, on the shared
// inputs and references of tests/common/typed_reference.hpp: element i of
// rank r's input for every dtype, and the reduction over every rank's input
// (floats in double within the rounding a ring adds, integers exactly, with
// the type's wrap-around). Every rank can generate every rank's input, so
// each checks its result without trusting the library.
//
// The bulk helpers pick the dtype's storage type once per call
// (reduce::with_dtype), so generating and checking millions of elements
// costs a few nanoseconds each: the suites spend their time on collectives,
// not on references (bench/RESULTS.md, "Test time").

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <cstdint>
#include <string>

#include "../common/typed_reference.hpp"
#include "collectives_env.hpp"
#include "reduce/with_dtype.hpp"

namespace collectives_reference {

inline const rrDataType_t kTypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64,
                                      rrFloat16, rrBfloat16, rrFloat32, rrFloat64};
inline const rrRedOp_t kOps[] = {rrSum, rrProd, rrMax, rrMin, rrAvg};

inline size_t type_size(rrDataType_t t) {
  switch (t) {
    case rrInt8: case rrUint8: return 1;
    case rrFloat16: case rrBfloat16: return 2;
    case rrInt32: case rrUint32: case rrFloat32: return 4;
    default: return 8;
  }
}
inline const char* type_name(rrDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16"};
  return names[t];
}
inline const char* op_name(rrRedOp_t o) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[o];
}

// Element `i` of `rank`'s input as a double, exactly representable in the type.
inline double input_value(rrDataType_t t, rrRedOp_t op, int rank, size_t i, uint64_t seed) {
  double v = 0;
  rr::reduce::with_dtype(t, [&](auto tag) { v = rr::test::to_double(rr::test::input<decltype(tag)>(op, rank, i, seed)); });
  return v;
}

// Element `i` of `buf` written from, or read as, a double (for the few
// elements the small cases check one by one).
inline void store(rrDataType_t t, void* buf, size_t i, double v) {
  rr::reduce::with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(buf)[i] = rr::test::from_double<T>(v);
  });
}
inline double load(rrDataType_t t, const void* buf, size_t i) {
  double v = 0;
  rr::reduce::with_dtype(t, [&](auto tag) { v = rr::test::to_double(static_cast<const decltype(tag)*>(buf)[i]); });
  return v;
}

// Writes elements [first, first + count) of `rank`'s input to `buf`.
inline void fill_input(rrDataType_t t, rrRedOp_t op, int rank, uint64_t seed, void* buf, size_t first, size_t count) {
  rr::test::fill(t, op, rank, seed, buf, first, count);
}

// Whether buf[k] is element first + k of `rank`'s input for every k < count;
// the first wrong ones are reported (ADD_FAILURE) under `what`.
inline bool check_input(rrDataType_t t, rrRedOp_t op, int rank, uint64_t seed, const void* buf, size_t first,
                        size_t count, const std::string& what) {
  std::string report;
  const size_t wrong = rr::test::count_not_input(t, op, rank, seed, buf, first, count, &report);
  EXPECT_EQ(wrong, 0u) << what << ":\n" << report;
  return wrong == 0;
}

// Checks out[k] against the reduction of input element first + k over the
// communicator's ranks, k < count. Returns whether all were right.
inline bool check_reduced(rrDataType_t t, rrRedOp_t op, const void* out, size_t first, size_t count, uint64_t seed) {
  std::string report;
  const size_t wrong = rr::test::count_wrong(t, op, collectives_env::g_size, seed, out, first, count, &report);
  EXPECT_EQ(wrong, 0u) << report;
  return wrong == 0;
}

}  // namespace collectives_reference
