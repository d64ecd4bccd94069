#pragma once
// Host reductions for every dtype x op: the work the ring does on each
// received chunk. Each call picks its loop once (dtype x op); the loops are
// vectorized and built for several x86-64 levels (AVX-512, AVX2, baseline),
// the best one chosen at load time. Element semantics live in functors.hpp.
//
// Arguments are checked by the caller (lib/api/): here an unknown dtype or
// op, a bitwise op on a floating dtype, or a divisor < 1 with rrAvg, is a bug
// and asserts.

#include <cstddef>

#include "ringreduce/ringreduce.h"

namespace rr::reduce {

// Bytes per element; 0 for an unknown dtype.
size_t dtype_size(rrDataType_t dtype);
// "int8", "float32", ...; "unknown" for an unknown dtype.
const char* dtype_name(rrDataType_t dtype);
// "sum", "prod", "max", "min", "avg", "band", "bor", "bxor"; "unknown" for
// an unknown op.
const char* op_name(rrRedOp_t op);
bool valid_dtype(int dtype);
bool valid_op(int op);
// rrBand, rrBor, rrBxor.
bool is_bitwise(rrRedOp_t op);
// float16, bfloat16, float32, float64.
bool is_floating(rrDataType_t dtype);
// Whether reduce() has a loop for dtype x op: both valid, and no bitwise op
// on a floating dtype (lib/api/ refuses that pair, naming both).
bool op_defined(rrDataType_t dtype, rrRedOp_t op);

// dst[i] = a[i] op b[i] for i < count. dst may be exactly a or b (in place),
// never partially overlapping either. rrAvg reduces as rrSum here: the
// division happens once, in reduce_last() or finish().
void reduce(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
            rrRedOp_t op);

// The last reduction of a ring step chain: as reduce(), and with rrAvg each
// result is divided by `divisor` (the rank count) in the same pass. Float16
// and bfloat16 divide the float sum: (float(a) + float(b)) / divisor, rounded
// once. `divisor` is ignored for other ops.
void reduce_last(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
                 rrRedOp_t op, int divisor);

// With rrAvg, dst[i] = src[i] / divisor; with other ops a copy. dst may equal
// src. For N == 1 and paths that do not end in reduce_last().
void finish(void* dst, const void* src, size_t count, rrDataType_t dtype, rrRedOp_t op,
            int divisor);

// Whether float16 loops use the F16C conversion instructions (x86-64 CPUs
// with AVX2 and F16C). The portable loops give the same bits.
bool float16_uses_f16c();
// Testing and benchmark hook: false forces the portable float16 loops, true
// restores the automatic choice. Process-wide; takes effect on later calls.
void allow_f16c(bool allowed);

}  // namespace rr::reduce
