#pragma once
// The work of one GPU thread in the element-wise kernels of device_reduce.cu,
// written as plain functions of the thread's indices (block, blocks, thread)
// so that a host test (tests/unit/kernel_indexing_test.cpp) can run every
// thread of a grid in turn, without a GPU, and check that each element is
// written exactly once. nvcc compiles them for the device; any C++17
// compiler for the host.
//
// Shapes: elementwise_vectors() for dst, a and b all 16-byte aligned: blocks
// take tiles of kThreads x kUnroll 16-byte vectors in turn, thread t owning
// vectors t, t + kThreads, ... of the tile (so each load instruction is
// coalesced across the warp, and a thread has kUnroll loads of each input in
// flight before its first use); then the whole grid takes the vectors after
// the last whole tile, and the elements after the last whole vector.
// elementwise_scalars() takes one element per access, for pointers that are
// not all aligned. No pointer is __restrict__: dst may be a or b, since each
// thread reads an element before it writes it and no other thread touches it.

#include <cstddef>
#include <cstdint>

#include "reduce/half.hpp"  // RR_HOST_DEVICE

#if defined(__CUDACC__)
#define RR_INLINE __forceinline__
#else
#define RR_INLINE inline
#endif
#if defined(__CUDA_ARCH__)  // nvcc's device pass; the host compiler has no such pragma
#define RR_UNROLL _Pragma("unroll")
#else
#define RR_UNROLL
#endif

namespace rr::kernels {

constexpr int kThreads = 256;  // per block
// 16-byte vectors of each input a thread loads before it uses the first: HBM
// needs many bytes in flight to reach its rate, and mapped host memory,
// microseconds away, needs more.
constexpr int kUnroll = 4;
constexpr size_t kVectorBytes = 16;
constexpr size_t kTileVectors = size_t(kThreads) * kUnroll;

// 16 bytes, aligned as one: loads and stores of it are single 16-byte
// accesses (the layout of CUDA's uint4).
struct alignas(16) Bytes16 {
  uint32_t x, y, z, w;
};

// One 16-byte access seen as elements. T is trivial (an integer, float,
// double, Half or BFloat16), so the union is too.
template <typename T>
union Vector {
  Bytes16 bits;
  T elements[kVectorBytes / sizeof(T)];
};

// Which thread of which grid: a kernel passes blockIdx.x, gridDim.x and
// threadIdx.x; a host test passes every value in turn.
struct ThreadIndex {
  size_t block;
  size_t blocks;
  size_t thread;  // in the block, < kThreads
};

// x = op(x, y) (kInputs == 2) or op(x) (kInputs == 1), lane by lane.
template <int kInputs, typename T, typename Op>
RR_HOST_DEVICE RR_INLINE void apply_vector(const Op& op, Vector<T>& x, const Vector<T>& y) {
RR_UNROLL
  for (size_t lane = 0; lane < kVectorBytes / sizeof(T); ++lane) {
    if constexpr (kInputs == 2) {
      x.elements[lane] = op(x.elements[lane], y.elements[lane]);
    } else {
      x.elements[lane] = op(x.elements[lane]);
    }
  }
}

template <int kInputs, typename T, typename Op>
RR_HOST_DEVICE RR_INLINE void apply_element(const Op& op, T* dst, const T* a, const T* b,
                                            size_t i) {
  if constexpr (kInputs == 2) {
    dst[i] = op(a[i], b[i]);
  } else {
    dst[i] = op(a[i]);
  }
}

// dst[i] = op(a[i], b[i]) or op(a[i]) for i < count; dst, a and b (when
// kInputs == 2) 16-byte aligned.
template <int kInputs, typename T, typename Op>
RR_HOST_DEVICE RR_INLINE void elementwise_vectors(T* dst, const T* a, const T* b, size_t count,
                                                  const Op& op, ThreadIndex index) {
  constexpr size_t kLanes = kVectorBytes / sizeof(T);
  const size_t vectors = count / kLanes;
  const size_t tiles = vectors / kTileVectors;
  Bytes16* dst_vectors = reinterpret_cast<Bytes16*>(dst);
  const Bytes16* a_vectors = reinterpret_cast<const Bytes16*>(a);
  const Bytes16* b_vectors = reinterpret_cast<const Bytes16*>(b);

  for (size_t tile = index.block; tile < tiles; tile += index.blocks) {
    const size_t first = tile * kTileVectors + index.thread;
    Vector<T> x[kUnroll], y[kUnroll];
RR_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      x[u].bits = a_vectors[first + u * kThreads];
      if constexpr (kInputs == 2) y[u].bits = b_vectors[first + u * kThreads];
    }
RR_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      apply_vector<kInputs>(op, x[u], y[u]);
      dst_vectors[first + u * kThreads] = x[u].bits;
    }
  }

  const size_t thread = index.block * kThreads + index.thread;
  const size_t threads = index.blocks * kThreads;
  for (size_t v = tiles * kTileVectors + thread; v < vectors; v += threads) {
    Vector<T> x, y;
    x.bits = a_vectors[v];
    if constexpr (kInputs == 2) y.bits = b_vectors[v];
    apply_vector<kInputs>(op, x, y);
    dst_vectors[v] = x.bits;
  }
  for (size_t i = vectors * kLanes + thread; i < count; i += threads) {
    apply_element<kInputs>(op, dst, a, b, i);
  }
}

// The same, one element per access, for any alignment.
template <int kInputs, typename T, typename Op>
RR_HOST_DEVICE RR_INLINE void elementwise_scalars(T* dst, const T* a, const T* b, size_t count,
                                                  const Op& op, ThreadIndex index) {
  const size_t threads = index.blocks * kThreads;
  for (size_t i = index.block * kThreads + index.thread; i < count; i += threads) {
    apply_element<kInputs>(op, dst, a, b, i);
  }
}

// Blocks for `count` elements: enough for one tile (vectors) or one element
// (scalars) per thread, at least 1, at most `max_blocks`.
inline size_t vector_blocks(size_t count, size_t element_bytes, size_t max_blocks) {
  const size_t vectors = count / (kVectorBytes / element_bytes);
  const size_t blocks = (vectors + kTileVectors - 1) / kTileVectors;
  return blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks;
}

inline size_t scalar_blocks(size_t count, size_t max_blocks) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks;
}

}  // namespace rr::kernels

#undef RR_INLINE
#undef RR_UNROLL
