// The bitwise ops (rrBand, rrBor, rrBxor) through every collective that
// takes an op: allreduce (the ring, and recursive paths for small counts),
// reduce (the tree and the chain), reduce-scatter, and their Async forms, for
// every integer type, checked bit for bit against a reference every rank
// computes from every rank's input. And the refusal of a floating type.
// Part of collectives_test (collectives_env.hpp).

#include <gtest/gtest.h>
#include <ringreduce/ringreduce.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives_env.hpp"
#include "shared_check.hpp"

namespace {

using namespace collectives_env;

const rrDataType_t kIntegerTypes[] = {rrInt8, rrUint8, rrInt32, rrUint32, rrInt64, rrUint64};
const rrRedOp_t kBitwiseOps[] = {rrBand, rrBor, rrBxor};

size_t type_size(rrDataType_t t) {
  switch (t) {
    case rrInt8: case rrUint8: return 1;
    case rrInt32: case rrUint32: return 4;
    default: return 8;
  }
}

const char* type_name(rrDataType_t t) {
  switch (t) {
    case rrInt8: return "int8";
    case rrUint8: return "uint8";
    case rrInt32: return "int32";
    case rrUint32: return "uint32";
    case rrInt64: return "int64";
    default: return "uint64";
  }
}

const char* op_name(rrRedOp_t op) { return op == rrBand ? "band" : op == rrBor ? "bor" : "bxor"; }

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element i of `rank`'s input, as 64 bits of which the type keeps the low
// ones (the sign bit of signed types included). Band's inputs are 3/4 ones
// and bor's 1/4, so that on five ranks their results are still mixed bits.
uint64_t input_bits(rrRedOp_t op, int rank, size_t i, uint64_t seed) {
  const uint64_t base = seed * 0x100000001B3ull ^ (static_cast<uint64_t>(rank) << 48) ^ (i << 1);
  const uint64_t a = splitmix(base), b = splitmix(base ^ 0x5555555555555555ull);
  if (op == rrBand) return a | b;
  if (op == rrBor) return a & b;
  return a;
}

uint64_t reference_bits(rrRedOp_t op, size_t i, uint64_t seed) {
  uint64_t acc = input_bits(op, 0, i, seed);
  for (int r = 1; r < g_size; ++r) {
    const uint64_t x = input_bits(op, r, i, seed);
    acc = op == rrBand ? acc & x : op == rrBor ? acc | x : acc ^ x;
  }
  return acc;
}

// Calls f with a value of the storage width of integer type `t` (1, 4 or 8 bytes).
template <class F>
decltype(auto) with_width(rrDataType_t t, F&& f) {
  switch (type_size(t)) {
    case 1: return f(uint8_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// Writes elements [first, first + count) of `rank`'s input at `buf`: the low
// bytes of the 64 bits are the element's.
void fill(rrDataType_t t, rrRedOp_t op, void* buf, size_t first, size_t count, int rank, uint64_t seed) {
  with_width(t, [&](auto w) {
    using W = decltype(w);
    W* out = static_cast<W*>(buf);
    for (size_t k = 0; k < count; ++k) out[k] = static_cast<W>(input_bits(op, rank, first + k, seed));
  });
}

// out[k] == the reduction of element first + k, bit for bit; returns whether all were.
bool check(rrDataType_t t, rrRedOp_t op, const void* out, size_t first, size_t count, uint64_t seed) {
  return with_width(t, [&](auto w) {
    using W = decltype(w);
    const W* got = static_cast<const W*>(out);
    size_t wrong = 0;
    for (size_t k = 0; k < count; ++k) {
      const W want = static_cast<W>(reference_bits(op, first + k, seed));
      if (got[k] != want && wrong++ < 5) {
        ADD_FAILURE() << "element " << first + k << ": got 0x" << std::hex << uint64_t{got[k]} << ", expected 0x"
                      << uint64_t{want};
      }
    }
    EXPECT_EQ(wrong, 0u);
    return wrong == 0;
  });
}

struct Case {
  rrDataType_t dtype;
  rrRedOp_t op;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (rrDataType_t t : kIntegerTypes) {
    for (rrRedOp_t op : kBitwiseOps) cases.push_back({t, op});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(type_name(info.param.dtype)) + "_" + op_name(info.param.op);
}

// Zero, one, fewer than the ranks, not divisible, primes; on the small
// communicator (96-byte chunks) the larger ones are many chunks per segment.
std::vector<size_t> counts() {
  const size_t n = static_cast<size_t>(g_size);
  return {0, 1, n - 1, n + 1, 2, 13, 101, 1031};
}

void check_allreduce(rrComm_t comm, rrDataType_t t, rrRedOp_t op, size_t count, bool in_place, uint64_t seed) {
  SCOPED_TRACE(std::string("allreduce ") + type_name(t) + " " + op_name(op) + " count=" + std::to_string(count) +
               (in_place ? " in place" : " out of place"));
  const size_t bytes = count * type_size(t);
  std::vector<uint8_t> send(bytes + 8, 0xAB), recv(bytes + 8, 0xCD);
  fill(t, op, send.data(), 0, count, g_rank, seed);
  const std::vector<uint8_t> original = send;
  uint8_t* out = in_place ? send.data() : recv.data();
  ASSERT_EQ(rrAllReduce(send.data(), out, count, t, op, comm, nullptr), rrSuccess) << rrGetLastError(comm);
  if (!in_place) {
    EXPECT_EQ(send, original) << "the send buffer was modified";
  }
  for (size_t k = 0; k < 8; ++k) ASSERT_EQ(out[bytes + k], in_place ? 0xAB : 0xCD) << "wrote past count";
  // Every rank's result is the same: checked once per job (shared_check.hpp).
  const size_t elem = type_size(t);
  shared_check::check_replicated(out, count, elem,
      std::string("bitwise allreduce ") + type_name(t) + " " + op_name(op) + " " + std::to_string(count) + " " +
          std::to_string(seed) + (in_place ? " in place" : ""),
      [&](size_t first, size_t n) { return check(t, op, out + first * elem, first, n, seed); });
}

class BitwiseAllReduce : public ::testing::TestWithParam<Case> {};

TEST_P(BitwiseAllReduce, MatchesReferenceBitForBit) {
  const Case c = GetParam();
  uint64_t seed = 5000 + static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  for (size_t count : counts()) {
    for (bool in_place : {false, true}) check_allreduce(g_small_comm, c.dtype, c.op, count, in_place, ++seed);
  }
  // Several default-size (512 KiB) chunks per ring segment.
  const size_t big = (size_t{3} << 20) / type_size(c.dtype) * static_cast<size_t>(g_size) + 7;
  check_allreduce(g_comm, c.dtype, c.op, big, false, ++seed);
}

INSTANTIATE_TEST_SUITE_P(Ucx, BitwiseAllReduce, ::testing::ValuesIn(all_cases()), case_name);

class BitwiseReduceScatter : public ::testing::TestWithParam<Case> {};

TEST_P(BitwiseReduceScatter, EachRankGetsItsBlockReduced) {
  const Case c = GetParam();
  uint64_t seed = 6000 + static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  const size_t elem = type_size(c.dtype);
  const size_t n = static_cast<size_t>(g_size);
  for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{13}, size_t{257}, (size_t{1} << 20) / elem + 3}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::string("reduce-scatter recvcount=") + std::to_string(count) + (in_place ? " in place" : ""));
      rrComm_t comm = count > 1000 ? g_comm : g_small_comm;
      std::vector<uint8_t> send(count * n * elem + 8, 0xAB), recv(count * elem + 8, 0xCD);
      fill(c.dtype, c.op, send.data(), 0, count * n, g_rank, ++seed);
      uint8_t* out = in_place ? send.data() + static_cast<size_t>(g_rank) * count * elem : recv.data();
      ASSERT_EQ(rrReduceScatter(send.data(), out, count, c.dtype, c.op, comm, nullptr), rrSuccess)
          << rrGetLastError(comm);
      if (!in_place) {
        for (size_t k = 0; k < 8; ++k) ASSERT_EQ(recv[count * elem + k], 0xCD) << "wrote past recvcount";
      }
      check(c.dtype, c.op, out, static_cast<size_t>(g_rank) * count, count, seed);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, BitwiseReduceScatter, ::testing::ValuesIn(all_cases()), case_name);

class BitwiseReduce : public ::testing::TestWithParam<Case> {};

TEST_P(BitwiseReduce, RootGetsTheReductionOthersAreUntouched) {
  const Case c = GetParam();
  uint64_t seed = 7000 + static_cast<uint64_t>(c.dtype) * 16 + static_cast<uint64_t>(c.op);
  const size_t elem = type_size(c.dtype);
  // Small counts take the binomial tree, large ones the chain.
  for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}, (size_t{1} << 20) / elem + 5}) {
    for (int root = 0; root < g_size; ++root) {
      SCOPED_TRACE("reduce count=" + std::to_string(count) + " root=" + std::to_string(root));
      rrComm_t comm = count > 2000 ? g_comm : g_small_comm;
      std::vector<uint8_t> send(count * elem + 8, 0xAB), recv(count * elem + 8, 0xCD);
      fill(c.dtype, c.op, send.data(), 0, count, g_rank, ++seed);
      ASSERT_EQ(rrReduce(send.data(), recv.data(), count, c.dtype, c.op, root, comm, nullptr), rrSuccess)
          << rrGetLastError(comm);
      if (g_rank == root) {
        check(c.dtype, c.op, recv.data(), 0, count, seed);
      } else {
        for (uint8_t byte : recv) ASSERT_EQ(byte, 0xCD) << "a non-root's recvbuff was written";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ucx, BitwiseReduce, ::testing::ValuesIn(all_cases()), case_name);

TEST(BitwiseAsync, AllReduceReduceAndReduceScatterInFlightTogether) {
  const size_t count = 777;
  const size_t n = static_cast<size_t>(g_size);
  const uint64_t seed = 8000;
  std::vector<uint8_t> a(count * 4), b(count * 8), c(count * n), c_out(count);
  std::vector<uint8_t> b_out(count * 8, 0);
  fill(rrUint32, rrBand, a.data(), 0, count, g_rank, seed);
  fill(rrInt64, rrBxor, b.data(), 0, count, g_rank, seed + 1);
  fill(rrInt8, rrBor, c.data(), 0, count * n, g_rank, seed + 2);
  rrRequest_t requests[3] = {};
  ASSERT_EQ(rrAllReduceAsync(a.data(), a.data(), count, rrUint32, rrBand, g_comm, &requests[0]), rrSuccess)
      << rrGetLastError(g_comm);
  ASSERT_EQ(rrReduceAsync(b.data(), b_out.data(), count, rrInt64, rrBxor, g_size - 1, g_comm, &requests[1]),
            rrSuccess)
      << rrGetLastError(g_comm);
  ASSERT_EQ(rrReduceScatterAsync(c.data(), c_out.data(), count, rrInt8, rrBor, g_comm, &requests[2]), rrSuccess)
      << rrGetLastError(g_comm);
  for (int k = 2; k >= 0; --k) ASSERT_EQ(rrWait(requests[k]), rrSuccess) << rrGetLastError(g_comm);
  check(rrUint32, rrBand, a.data(), 0, count, seed);
  if (g_rank == g_size - 1) check(rrInt64, rrBxor, b_out.data(), 0, count, seed + 1);
  check(rrInt8, rrBor, c_out.data(), static_cast<size_t>(g_rank) * count, count, seed + 2);
}

// A floating type with a bitwise op is refused before anything is sent, on
// every rank alike, with text naming the op and the datatype; the
// communicator stays usable.
TEST(BitwiseOps, FloatingTypesAreRefusedNamingOpAndType) {
  const rrDataType_t floats[] = {rrFloat16, rrBfloat16, rrFloat32, rrFloat64};
  const char* names[] = {"float16", "bfloat16", "float32", "float64"};
  std::vector<double> buf(64 * static_cast<size_t>(g_size)), out(64 * static_cast<size_t>(g_size));
  for (size_t f = 0; f < 4; ++f) {
    for (rrRedOp_t op : kBitwiseOps) {
      const std::string what = std::string("op ") + op_name(op) + " is not defined for datatype " + names[f];
      auto expect_refused = [&](rrResult_t result, const char* call) {
        EXPECT_EQ(result, rrInvalidArgument) << call << " " << what;
        const std::string text = rrGetLastError(g_comm);
        EXPECT_NE(text.find(std::string(call) + ": " + what), std::string::npos) << text;
      };
      expect_refused(rrAllReduce(buf.data(), out.data(), 8, floats[f], op, g_comm, nullptr), "rrAllReduce");
      expect_refused(rrReduceScatter(buf.data(), out.data(), 8, floats[f], op, g_comm, nullptr), "rrReduceScatter");
      expect_refused(rrReduce(buf.data(), out.data(), 8, floats[f], op, 0, g_comm, nullptr), "rrReduce");
      rrRequest_t request = nullptr;
      expect_refused(rrAllReduceAsync(buf.data(), out.data(), 8, floats[f], op, g_comm, &request), "rrAllReduce");
      expect_refused(rrReduceScatterAsync(buf.data(), out.data(), 8, floats[f], op, g_comm, &request),
                     "rrReduceScatter");
      expect_refused(rrReduceAsync(buf.data(), out.data(), 8, floats[f], op, 0, g_comm, &request), "rrReduce");
      EXPECT_EQ(request, nullptr) << "a refused call wrote its request";
      // Refused even with count 0, which is otherwise a local no-op.
      expect_refused(rrAllReduce(buf.data(), out.data(), 0, floats[f], op, g_comm, nullptr), "rrAllReduce");
    }
  }
  rrResult_t async_error = rrInternalError;
  ASSERT_EQ(rrCommGetAsyncError(g_comm, &async_error), rrSuccess);
  EXPECT_EQ(async_error, rrSuccess);
  const std::vector<double> ones(8, 1.0);
  std::vector<double> sum(8);
  ASSERT_EQ(rrAllReduce(ones.data(), sum.data(), 8, rrFloat64, rrSum, g_comm, nullptr), rrSuccess);
  EXPECT_EQ(sum[7], static_cast<double>(g_size));
}

}  // namespace
