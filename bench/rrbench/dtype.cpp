#include "dtype.h"

#include <cmath>
#include <cstring>

namespace rrbench {

std::size_t type_size(DataType type) {
  switch (type) {
    case DataType::kInt8: case DataType::kUint8: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kUint32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kUint64: case DataType::kFloat64: return 8;
  }
  return 0;
}

bool is_float(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

bool is_signed_int(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
}

bool is_bitwise(RedOp op) { return op == RedOp::kBand || op == RedOp::kBor || op == RedOp::kBxor; }

const char* type_name(DataType type) {
  switch (type) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "half";
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kBfloat16: return "bfloat16";
  }
  return "?";
}

const char* op_name(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMax: return "max";
    case RedOp::kMin: return "min";
    case RedOp::kAvg: return "avg";
    case RedOp::kBand: return "band";
    case RedOp::kBor: return "bor";
    case RedOp::kBxor: return "bxor";
  }
  return "?";
}

bool parse_type(const std::string& text, DataType* type) {
  struct Alias {
    const char* name;
    DataType type;
  };
  static const Alias kAliases[] = {
      {"int8", DataType::kInt8},       {"char", DataType::kInt8},         {"uint8", DataType::kUint8},
      {"int32", DataType::kInt32},     {"int", DataType::kInt32},         {"uint32", DataType::kUint32},
      {"int64", DataType::kInt64},     {"uint64", DataType::kUint64},     {"half", DataType::kFloat16},
      {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},      {"float", DataType::kFloat32},
      {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},      {"double", DataType::kFloat64},
      {"float64", DataType::kFloat64}, {"fp64", DataType::kFloat64},      {"bfloat16", DataType::kBfloat16},
      {"bf16", DataType::kBfloat16},
  };
  for (const Alias& alias : kAliases) {
    if (text == alias.name) {
      *type = alias.type;
      return true;
    }
  }
  return false;
}

bool parse_op(const std::string& text, RedOp* op) {
  for (RedOp candidate : kAllOps) {
    if (text == op_name(candidate)) {
      *op = candidate;
      return true;
    }
  }
  if (text == "product") {
    *op = RedOp::kProd;
    return true;
  }
  return false;
}

uint16_t float_to_half_bits(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof f);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): scale into the 10-bit mantissa, round half to even.
    const float magnitude = std::fabs(value) * 16777216.0f;  // 2^24: one half subnormal step is 1
    const float rounded = std::nearbyint(magnitude);          // default rounding mode: to nearest even
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t dropped = abs & 0x1fffu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float half_bits_to_float(uint16_t bits) {
  const uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  uint32_t f;
  std::memcpy(&f, &magnitude, sizeof f);
  f |= sign;
  float out;
  std::memcpy(&out, &f, sizeof out);
  return out;
}

uint16_t float_to_bfloat16_bits(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof f);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);  // to nearest even
  return static_cast<uint16_t>((f + rounding) >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) {
  const uint32_t f = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &f, sizeof out);
  return out;
}

double load_value(DataType type, const void* buffer, std::size_t index) {
  switch (type) {
    case DataType::kInt8: return static_cast<const int8_t*>(buffer)[index];
    case DataType::kUint8: return static_cast<const uint8_t*>(buffer)[index];
    case DataType::kInt32: return static_cast<const int32_t*>(buffer)[index];
    case DataType::kUint32: return static_cast<const uint32_t*>(buffer)[index];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buffer)[index]);
    case DataType::kUint64: return static_cast<double>(static_cast<const uint64_t*>(buffer)[index]);
    case DataType::kFloat16: return half_bits_to_float(static_cast<const uint16_t*>(buffer)[index]);
    case DataType::kFloat32: return static_cast<const float*>(buffer)[index];
    case DataType::kFloat64: return static_cast<const double*>(buffer)[index];
    case DataType::kBfloat16: return bfloat16_bits_to_float(static_cast<const uint16_t*>(buffer)[index]);
  }
  return 0;
}

void store_value(DataType type, void* buffer, std::size_t index, double value) {
  switch (type) {
    case DataType::kInt8: static_cast<int8_t*>(buffer)[index] = static_cast<int8_t>(value); break;
    case DataType::kUint8: static_cast<uint8_t*>(buffer)[index] = static_cast<uint8_t>(value); break;
    case DataType::kInt32: static_cast<int32_t*>(buffer)[index] = static_cast<int32_t>(value); break;
    case DataType::kUint32: static_cast<uint32_t*>(buffer)[index] = static_cast<uint32_t>(value); break;
    case DataType::kInt64: static_cast<int64_t*>(buffer)[index] = static_cast<int64_t>(value); break;
    case DataType::kUint64: static_cast<uint64_t*>(buffer)[index] = static_cast<uint64_t>(value); break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buffer)[index] = float_to_half_bits(static_cast<float>(value));
      break;
    case DataType::kFloat32: static_cast<float*>(buffer)[index] = static_cast<float>(value); break;
    case DataType::kFloat64: static_cast<double*>(buffer)[index] = value; break;
    case DataType::kBfloat16:
      static_cast<uint16_t*>(buffer)[index] = float_to_bfloat16_bits(static_cast<float>(value));
      break;
  }
}

double unit_roundoff(DataType type) {
  switch (type) {
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBfloat16: return std::ldexp(1.0, -8);
    case DataType::kFloat32: return std::ldexp(1.0, -24);
    case DataType::kFloat64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

}  // namespace rrbench
