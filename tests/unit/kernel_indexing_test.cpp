// The CUDA kernels' per-thread work (kernels/elementwise.hpp), run on the
// host: every thread of a grid in turn, for counts around the vector width,
// the tile and their multiples, grids capped small and not. No GPU or nvcc is
// needed, so every CI run checks what tests/gpu can only check on a GPU: that
// each element below count is written exactly once and none past it, in both
// shapes (16-byte vectors with a scalar tail, and scalars), with one input
// and with two. Threads of one grid write disjoint elements, so running them
// one after another gives what the GPU gives.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/elementwise.hpp"
#include "reduce/functors.hpp"
#include "reduce/half.hpp"
#include "reduce/reduce.hpp"

namespace rr::kernels {
namespace {

// Counts a write: in place (dst == a), x + 1 for one input and x + y with
// y == 1 for two, so an element written twice is off by one more.
template <typename T>
struct Increment {
  T operator()(T x) const { return T(x + 1); }
  T operator()(T x, T y) const { return T(x + y); }
};

enum class Shape { kVectors, kScalars };

// 16-byte aligned storage for n elements of T and one guard element after.
template <typename T>
struct AlignedBuffer {
  std::vector<Bytes16> storage;
  explicit AlignedBuffer(size_t n) : storage((n + 1) * sizeof(T) / sizeof(Bytes16) + 1) {}
  T* data() { return reinterpret_cast<T*>(storage.data()); }
};

template <int kInputs, typename T, typename Op>
void run_grid(Shape shape, T* dst, const T* a, const T* b, size_t count, const Op& op,
              size_t blocks) {
  for (size_t block = 0; block < blocks; ++block) {
    for (size_t thread = 0; thread < size_t(kThreads); ++thread) {
      if (shape == Shape::kVectors) {
        elementwise_vectors<kInputs>(dst, a, b, count, op, {block, blocks, thread});
      } else {
        elementwise_scalars<kInputs>(dst, a, b, count, op, {block, blocks, thread});
      }
    }
  }
}

template <typename T, int kInputs>
void expect_each_element_written_once(Shape shape, size_t count, size_t max_blocks) {
  const size_t blocks = shape == Shape::kVectors ? vector_blocks(count, sizeof(T), max_blocks)
                                                 : scalar_blocks(count, max_blocks);
  SCOPED_TRACE("element bytes " + std::to_string(sizeof(T)) + ", inputs " +
               std::to_string(kInputs) + (shape == Shape::kVectors ? ", vectors" : ", scalars") +
               ", count " + std::to_string(count) + ", blocks " + std::to_string(blocks));
  ASSERT_GE(blocks, 1u);
  ASSERT_LE(blocks, max_blocks);
  AlignedBuffer<T> data(count), ones(count);
  T* x = data.data();
  T* y = ones.data();
  for (size_t i = 0; i <= count; ++i) {
    x[i] = T(i * 7 + 3);
    y[i] = T(1);
  }
  run_grid<kInputs>(shape, x, x, y, count, Increment<T>{}, blocks);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (x[i] != T(T(i * 7 + 3) + 1)) {
      if (wrong++ == 0) {
        ADD_FAILURE() << "element " << i << " was written " << (long long)(T(x[i] - T(i * 7 + 3)))
                      << " times";
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(x[count], T(count * 7 + 3)) << "wrote past the end";
}

// Counts at the edges of a vector (16 / element bytes), of a tile (kThreads x
// kUnroll vectors) and of the grid's stride.
std::vector<size_t> edge_counts(size_t element_bytes) {
  const size_t lanes = kVectorBytes / element_bytes;
  const size_t tile = kTileVectors * lanes;
  std::vector<size_t> counts = {0, 1, 2, 3, lanes - 1, lanes, lanes + 1, 4097};
  for (size_t base : {tile, 2 * tile, 5 * tile, 8 * tile}) {
    for (size_t delta : {size_t{0}, size_t{1}, lanes - 1, lanes, lanes + 1}) {
      counts.push_back(base + delta);
      counts.push_back(base - delta);
    }
  }
  counts.push_back((size_t{1} << 20) + 1);
  return counts;
}

template <typename T>
void check_type() {
  // max_blocks 3 makes blocks loop over several tiles; the large cap gives
  // one tile (or fewer elements) per block.
  for (size_t max_blocks : {size_t{1}, size_t{3}, size_t{1} << 20}) {
    for (size_t count : edge_counts(sizeof(T))) {
      if (count > (size_t{1} << 18) && max_blocks == 1) continue;  // slow and adds nothing
      expect_each_element_written_once<T, 1>(Shape::kVectors, count, max_blocks);
      expect_each_element_written_once<T, 2>(Shape::kVectors, count, max_blocks);
      expect_each_element_written_once<T, 1>(Shape::kScalars, count, max_blocks);
      expect_each_element_written_once<T, 2>(Shape::kScalars, count, max_blocks);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(KernelIndexing, EachElementWrittenOnce1ByteElements) { check_type<uint8_t>(); }
TEST(KernelIndexing, EachElementWrittenOnce2ByteElements) { check_type<uint16_t>(); }
TEST(KernelIndexing, EachElementWrittenOnce4ByteElements) { check_type<uint32_t>(); }
TEST(KernelIndexing, EachElementWrittenOnce8ByteElements) { check_type<uint64_t>(); }

TEST(KernelIndexing, GridSizes) {
  // One tile of vectors per block, at least one block, at most the cap.
  EXPECT_EQ(vector_blocks(0, 4, 100), 1u);
  EXPECT_EQ(vector_blocks(3, 4, 100), 1u);
  EXPECT_EQ(vector_blocks(kTileVectors * 4, 4, 100), 1u);
  EXPECT_EQ(vector_blocks(kTileVectors * 4 + 4, 4, 100), 2u);
  EXPECT_EQ(vector_blocks(kTileVectors * 16 * 1000, 1, 100), 100u);
  EXPECT_EQ(scalar_blocks(0, 100), 1u);
  EXPECT_EQ(scalar_blocks(kThreads, 100), 1u);
  EXPECT_EQ(scalar_blocks(kThreads + 1, 100), 2u);
  EXPECT_EQ(scalar_blocks(size_t{1} << 40, 100), 100u);
}

// The lanes of a vector carry the right elements: a real functor through
// the vector shape gives the host path's bits (lib/reduce/).
template <typename T>
T value_from(float f) {
  if constexpr (std::is_same_v<T, Half>) {
    return to_half(f);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(f);
  } else if constexpr (std::is_integral_v<T>) {
    // Through a signed integer: a negative float converted straight to an
    // unsigned type is undefined (clang's UBSan stops on it), the integer's
    // conversion is modular.
    return static_cast<T>(static_cast<int64_t>(f));
  } else {
    return T(f);
  }
}

template <typename T>
void check_functor_lanes(rrDataType_t dtype) {
  SCOPED_TRACE(reduce::dtype_name(dtype));
  const size_t count = kTileVectors * (kVectorBytes / sizeof(T)) * 2 + 37;
  AlignedBuffer<T> a(count), b(count), out(count);
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> value(-100, 100);
  for (size_t i = 0; i < count; ++i) {
    a.data()[i] = value_from<T>(float(value(rng)) / 8);
    b.data()[i] = value_from<T>(float(value(rng)) / 8);
  }
  std::vector<T> want(count);
  reduce::reduce(want.data(), a.data(), b.data(), count, dtype, rrProd);
  run_grid<2>(Shape::kVectors, out.data(), a.data(), b.data(), count, reduce::ProdOp<T>{},
              vector_blocks(count, sizeof(T), 2));
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(std::memcmp(&out.data()[i], &want[i], sizeof(T)), 0) << "element " << i;
  }
}

TEST(KernelIndexing, VectorLanesGiveTheHostPathsBits) {
  check_functor_lanes<int8_t>(rrInt8);
  check_functor_lanes<int32_t>(rrInt32);
  check_functor_lanes<uint64_t>(rrUint64);
  check_functor_lanes<Half>(rrFloat16);
  check_functor_lanes<BFloat16>(rrBfloat16);
  check_functor_lanes<float>(rrFloat32);
  check_functor_lanes<double>(rrFloat64);
}

}  // namespace
}  // namespace rr::kernels
