// The -c reference: conversions and reduction arithmetic the check relies on.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "collective.h"
#include "dtype.h"
#include "reference.h"

namespace rrbench {
namespace {

TEST(HalfConversion, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);               // rounds up past the largest half
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.0p-11f), 0x3c00);      // a tie: to even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.8p-11f), 0x3c01);
  EXPECT_EQ(float_to_half_bits(0x1.0p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1.0p-24f);
  EXPECT_TRUE(std::isinf(half_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(bits))), bits);
  }
}

TEST(Bfloat16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1.0p-8f), 0x3f80);  // a tie: to even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1.8p-8f), 0x3f81);
  EXPECT_EQ(bfloat16_bits_to_float(0x3f81), 1.0f + 0x1.0p-7f);
}

TEST(Reference, IntegersWrapInTheirType) {
  const double int8s[] = {100, 100};
  EXPECT_EQ(reduce_reference(DataType::kInt8, RedOp::kSum, int8s, 2).value, -56);
  const double uint8s[] = {200, 100};
  EXPECT_EQ(reduce_reference(DataType::kUint8, RedOp::kSum, uint8s, 2).value, 44);
  EXPECT_EQ(reduce_reference(DataType::kUint8, RedOp::kProd, uint8s, 2).value, (200 * 100) % 256);
  const double avg[] = {-7, 0, 0};
  EXPECT_EQ(reduce_reference(DataType::kInt32, RedOp::kAvg, avg, 3).value, -2);  // truncates toward zero
  EXPECT_EQ(reduce_reference(DataType::kInt32, RedOp::kMax, avg, 3).value, 0);
  EXPECT_EQ(reduce_reference(DataType::kInt32, RedOp::kSum, avg, 3).tolerance, 0);
}

TEST(Reference, BitwiseOpsSeeTheTwosComplementBits) {
  const double int8s[] = {-1, 0x0f, -128};
  EXPECT_EQ(reduce_reference(DataType::kInt8, RedOp::kBand, int8s, 3).value, 0);
  EXPECT_EQ(reduce_reference(DataType::kInt8, RedOp::kBand, int8s, 2).value, 0x0f);
  EXPECT_EQ(reduce_reference(DataType::kInt8, RedOp::kBor, int8s, 3).value, -1);
  EXPECT_EQ(reduce_reference(DataType::kInt8, RedOp::kBxor, int8s, 3).value, 0x70);  // 0xf0 ^ 0x80
  const double uint32s[] = {4000000000.0, 65535};
  EXPECT_EQ(reduce_reference(DataType::kUint32, RedOp::kBxor, uint32s, 2).value, 4000045055.0);  // 0xee6b2800 ^ 0xffff
  EXPECT_EQ(reduce_reference(DataType::kInt64, RedOp::kBor, int8s, 3).tolerance, 0);
}

TEST(Reference, FloatToleranceCoversRoundingButNotAnError) {
  const double xs[] = {1.0, 0x1.0p-24};
  const Expected e = reduce_reference(DataType::kFloat32, RedOp::kSum, xs, 2);
  EXPECT_TRUE(matches(static_cast<float>(1.0 + 0x1.0p-24), e));  // rounded in float32
  EXPECT_FALSE(matches(1.01, e));
  EXPECT_FALSE(matches(NAN, e));
}

TEST(Reference, InputsAreExactInTheirTypeAndDifferByRank) {
  for (DataType type : kAllTypes) {
    std::vector<unsigned char> buffer(type_size(type));
    for (std::size_t i = 0; i < 100; ++i) {
      const double v = input_value(type, RedOp::kSum, 1, i, 7);
      store_value(type, buffer.data(), 0, v);
      ASSERT_EQ(load_value(type, buffer.data(), 0), v) << type_name(type) << " element " << i;
    }
    EXPECT_NE(input_value(type, RedOp::kSum, 0, 5, 7), input_value(type, RedOp::kSum, 1, 5, 7)) << type_name(type);
  }
}

TEST(AllReduceCheck, CountsEveryWrongElement) {
  const RowSpec row{DataType::kFloat32, RedOp::kSum, -1, 64, 0, 3, 11};
  std::vector<float> result(64);
  for (std::size_t i = 0; i < 64; ++i) {
    double sum = 0;
    for (int r = 0; r < 3; ++r) sum += input_value(DataType::kFloat32, RedOp::kSum, r, i, 11);
    result[i] = static_cast<float>(sum);
  }
  EXPECT_EQ(kAllReduce.count_wrong(row, result.data()), 0u);
  result[5] += 1.0f;
  result[63] = NAN;
  EXPECT_EQ(kAllReduce.count_wrong(row, result.data()), 2u);
}

}  // namespace
}  // namespace rrbench

namespace rrbench {
namespace {

// A check that passes a result nobody wrote would make every row "correct":
// each collective must count a poisoned output as wrong.
TEST(CollectiveChecks, CountPoisonedOutputsAsWrong) {
  for (const Collective* coll : all_collectives()) {
    const RowSpec row{DataType::kInt32, RedOp::kSum, /*root=*/1, coll->row_count(48, 3), /*rank=*/1, 3, 5};
    std::vector<unsigned char> poisoned(coll->recv_count(row) * sizeof(int32_t), 0xA5);
    EXPECT_EQ(coll->count_wrong(row, poisoned.data()), coll->recv_count(row)) << coll->name;
  }
}

TEST(CollectiveChecks, AllGatherAcceptsEveryRanksBlockInOrder) {
  const RowSpec row{DataType::kFloat32, RedOp::kSum, -1, 12, /*rank=*/2, 3, 9};
  std::vector<float> result(12);
  for (std::size_t i = 0; i < 12; ++i) {
    result[i] = static_cast<float>(input_value(DataType::kFloat32, RedOp::kSum, static_cast<int>(i / 4), i % 4, 9));
  }
  EXPECT_EQ(kAllGather.count_wrong(row, result.data()), 0u);
  std::swap(result[0], result[4]);  // rank 0's and rank 1's first elements exchanged
  EXPECT_EQ(kAllGather.count_wrong(row, result.data()), 2u);
}

TEST(CollectiveChecks, ReduceChecksTheRootOnly) {
  const RowSpec row{DataType::kInt32, RedOp::kSum, /*root=*/0, 8, /*rank=*/1, 2, 3};
  std::vector<int32_t> untouched(8, 0);
  EXPECT_EQ(kReduce.count_wrong(row, untouched.data()), 0u);
}

}  // namespace
}  // namespace rrbench
