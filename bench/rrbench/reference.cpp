#include "reference.h"

#include <algorithm>
#include <cmath>

namespace rrbench {

namespace {

// splitmix64 of (seed, rank, index): an independent value per element for a
// few multiplies, so references over millions of elements stay cheap.
uint64_t mix(uint64_t seed, int rank, std::size_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) << 40) ^ index;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Wraps an integer accumulated modulo 2^64 into the type's width and sign.
double wrap_integer(DataType type, uint64_t value) {
  const int bits = static_cast<int>(type_size(type)) * 8;
  if (bits < 64) value &= (uint64_t{1} << bits) - 1;
  if (!is_signed_int(type)) return static_cast<double>(value);
  if (bits < 64 && (value >> (bits - 1)) != 0) value |= ~uint64_t{0} << bits;
  return static_cast<double>(static_cast<int64_t>(value));
}

}  // namespace

double input_value(DataType type, RedOp op, int rank, std::size_t index, uint64_t seed) {
  const uint64_t r = mix(seed, rank, index);
  if (is_float(type)) {
    const double unit = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    const double value = op == RedOp::kProd ? 0.5 + unit : -100.0 + 200.0 * unit;
    // Round to the type so the reference starts from exactly what was sent.
    switch (type) {
      case DataType::kFloat16: return half_bits_to_float(float_to_half_bits(static_cast<float>(value)));
      case DataType::kBfloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(static_cast<float>(value)));
      case DataType::kFloat32: return static_cast<float>(value);
      default: return value;
    }
  }
  switch (type) {
    case DataType::kInt8: return static_cast<int8_t>(r);
    case DataType::kUint8: return static_cast<uint8_t>(r);
    case DataType::kInt32: return static_cast<double>(static_cast<int64_t>(r % 2000001) - 1000000);
    case DataType::kUint32: return static_cast<double>(r % 4000000000u);
    case DataType::kInt64: return static_cast<double>(static_cast<int64_t>(r % 2000000001) - 1000000000);
    default: return static_cast<double>(r % 4000000000u);
  }
}

Expected reduce_reference(DataType type, RedOp op, const double* values, int n) {
  if (op == RedOp::kMax) return {*std::max_element(values, values + n), 0.0};
  if (op == RedOp::kMin) return {*std::min_element(values, values + n), 0.0};
  if (!is_float(type)) {
    // Exact arithmetic modulo 2^64, then the type's wrap-around.
    // (Every input is exact in a double and within int64's range, so the
    // bitwise ops see the two's complement bits the engine sees.)
    uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(values[0]));
    for (int k = 1; k < n; ++k) {
      const uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(values[k]));
      switch (op) {
        case RedOp::kProd: acc *= x; break;
        case RedOp::kBand: acc &= x; break;
        case RedOp::kBor: acc |= x; break;
        case RedOp::kBxor: acc ^= x; break;
        default: acc += x; break;
      }
    }
    const double wrapped = wrap_integer(type, acc);
    if (op != RedOp::kAvg) return {wrapped, 0.0};
    // NCCL's integer avg: the wrapped sum divided in the type, truncating.
    if (is_signed_int(type)) return {static_cast<double>(static_cast<int64_t>(wrapped) / n), 0.0};
    return {static_cast<double>(static_cast<uint64_t>(wrapped) / static_cast<uint64_t>(n)), 0.0};
  }
  double value = values[0];
  double magnitude = std::fabs(values[0]);
  for (int k = 1; k < n; ++k) {
    if (op == RedOp::kProd) {
      value *= values[k];
    } else {
      value += values[k];
      magnitude += std::fabs(values[k]);
    }
  }
  if (op == RedOp::kAvg) value /= n, magnitude /= n;
  if (op == RedOp::kProd) magnitude = std::fabs(value) * 1.01;
  // Each of the n + 1 roundings errs by at most one unit roundoff of the
  // running magnitude; twice that covers implementations that round per
  // element in a wider type first.
  return {value, 2.0 * (n + 1) * unit_roundoff(type) * magnitude};
}

}  // namespace rrbench
