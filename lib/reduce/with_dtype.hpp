#pragma once
// Calls f(T{}) with T the C++ element type of an rrDataType_t, so code that is
// written once per element type (the CUDA launches, the tests of every dtype)
// picks it in one place. Host-side dispatch only.

#include <cstdint>

#include "reduce/half.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::reduce {

// False, without calling f, for a value that is not a dtype.
template <typename F>
bool with_dtype(rrDataType_t dtype, F&& f) {
  switch (dtype) {
    case rrInt8: f(int8_t{}); return true;
    case rrUint8: f(uint8_t{}); return true;
    case rrInt32: f(int32_t{}); return true;
    case rrUint32: f(uint32_t{}); return true;
    case rrInt64: f(int64_t{}); return true;
    case rrUint64: f(uint64_t{}); return true;
    case rrFloat16: f(Half{}); return true;
    case rrFloat32: f(float{}); return true;
    case rrFloat64: f(double{}); return true;
    case rrBfloat16: f(BFloat16{}); return true;
    default: return false;
  }
}

}  // namespace rr::reduce
