#pragma once
// CUDA reductions for every dtype x op: the device side of lib/reduce/reduce.hpp,
// with the same three calls and the same element semantics (the functors in
// lib/reduce/functors.hpp are compiled into the kernels; float16 and bfloat16
// widen to float, compute and round once, bit for bit as on the host).
//
// This header is plain C++: no CUDA types, so the engine can include it from
// .cpp files. `stream` is a cudaStream_t passed as void*; nullptr is the
// default stream. Every call only enqueues work on `stream` (it does not wait
// for it) on the current device, which must be the stream's device.
//
// Pointers are device pointers, or pointers a kernel may read and write from
// the current device: device memory, managed memory, or pinned host memory
// that is mapped (cudaHostAlloc with cudaHostAllocMapped, cudaHostRegister
// with cudaHostRegisterMapped; cudaHostGetDevicePointer gives the pointer to
// pass, which under unified addressing is the host pointer itself). The reduce-copy
// the staging path wants is `device_reduce(dst, received, b, ...)` where
// `received` is a mapped pinned slot: the kernel reads it across the bus once,
// in the same pass that reduces, instead of an H2D copy into a device scratch
// buffer followed by a reduction that reads it again. Reading host memory a
// kernel runs at the bus's speed, not HBM's; whether the fused form beats
// "copy, then reduce" for a given chunk size is measured by rr-gpu-bench.
//
// Kernels move 16 bytes per thread per access when dst, a and b (or dst and
// src) are all 16-byte aligned, with a scalar tail for count % (16 /
// element size); otherwise they take a scalar loop over elements. dst may be
// exactly a or b (in place), never partially overlapping either.
//
// Differences from the host path: an arithmetic result that is NaN is the
// GPU's canonical NaN (0x7fffffff for float32, and so on), where the host
// keeps an input's payload; max and min return the input NaN itself on both.
// Integer results, finite float results, infinities and the signs of zeros
// are the same bits as the host's.
//
// Errors: an unknown dtype or op, a bitwise op (rrBand, rrBor, rrBxor) on a
// floating dtype, or a divisor < 1 with rrAvg, is
// InvalidArgument; a failed launch or copy is SystemError naming the call,
// dtype, op and count with CUDA's error text. A fault inside a kernel (a bad
// pointer) is reported by CUDA at a later call on the stream, as always.
//
// Built only when CUDA is found (kernels_dep, which defines RR_HAVE_CUDA).

#include <cstddef>

#include "common/status.hpp"
#include "ringreduce/ringreduce.h"

namespace rr::kernels {

// dst[i] = a[i] op b[i] for i < count. rrAvg reduces as rrSum here: the
// division happens once, in device_reduce_last() or device_finish().
Status device_reduce(void* dst, const void* a, const void* b, size_t count, rrDataType_t dtype,
                     rrRedOp_t op, void* stream);

// The last reduction of a ring step chain: as device_reduce(), and with rrAvg
// each result is divided by `divisor` (the rank count) in the same pass, as
// rr::reduce::reduce_last() does. `divisor` is ignored for other ops.
Status device_reduce_last(void* dst, const void* a, const void* b, size_t count,
                          rrDataType_t dtype, rrRedOp_t op, int divisor, void* stream);

// With rrAvg, dst[i] = src[i] / divisor; with other ops a copy
// (cudaMemcpyAsync, nothing when dst == src). dst may equal src.
Status device_finish(void* dst, const void* src, size_t count, rrDataType_t dtype, rrRedOp_t op,
                     int divisor, void* stream);

}  // namespace rr::kernels
