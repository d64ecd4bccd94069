// Element types and reduction operators as rr-bench names them (nccl-tests'
// spellings), with the conversions the reference check needs. Independent of
// the engine on purpose: the check must not trust the code it checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rrbench {

// Same order as ncclDataType_t and rrDataType_t.
enum class DataType { kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32, kFloat64, kBfloat16 };
// kSum..kAvg in ncclRedOp_t's order; the bitwise ops (MPI_BAND, MPI_BOR,
// MPI_BXOR) are integer-only and have no NCCL or Gloo counterpart.
enum class RedOp { kSum, kProd, kMax, kMin, kAvg, kBand, kBor, kBxor };

inline constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,   DataType::kInt32,
                                         DataType::kUint32,  DataType::kInt64,   DataType::kUint64,
                                         DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                                         DataType::kBfloat16};
inline constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                                    RedOp::kAvg, RedOp::kBand, RedOp::kBor, RedOp::kBxor};

std::size_t type_size(DataType type);
bool is_float(DataType type);
bool is_signed_int(DataType type);
// band, bor, bxor: defined for the integer types only.
bool is_bitwise(RedOp op);
// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* type_name(DataType type);
const char* op_name(RedOp op);
// Accepts nccl-tests' names and the usual aliases (float32, fp16, bf16, ...).
bool parse_type(const std::string& text, DataType* type);
bool parse_op(const std::string& text, RedOp* op);

// IEEE binary16 and bfloat16, round to nearest even.
uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

// Element `index` of a buffer of `type`, as a double (exact for every type
// but 64-bit integers above 2^53, which the inputs never reach).
double load_value(DataType type, const void* buffer, std::size_t index);
void store_value(DataType type, void* buffer, std::size_t index, double value);

// The unit roundoff of a floating type (2^-p for p mantissa bits).
double unit_roundoff(DataType type);

}  // namespace rrbench
