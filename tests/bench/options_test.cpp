// rr-bench's command line in process: nccl-tests' defaults and meanings, and
// a UsageError naming the fault for every bad flag (main turns it into exit 2).

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "options.h"

namespace rrbench {
namespace {

Options parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"rr-bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

std::string usage_error(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Options, DefaultsAreNcclTests) {
  const Options o = parse({});
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 5);
  EXPECT_TRUE(o.check);
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0], DataType::kFloat32);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], RedOp::kSum);
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.timeout_s, 0);
  EXPECT_EQ(o.backends, std::vector<std::string>{"ringreduce"});
  ASSERT_EQ(o.collectives.size(), 1u);
  EXPECT_EQ(o.collectives[0], &kAllReduce);
}

TEST(Options, ParsesEveryNcclTestsFlag) {
  const Options o = parse({"-b", "1K", "-e", "64M", "-f", "2", "-i", "4096", "-n", "7", "-w", "0", "-c", "0", "-d",
                           "half", "-o", "max", "-r", "1", "-z", "1", "-T", "30", "--backend", "gloo", "--backend",
                           "ringreduce", "--coll", "allreduce", "--json=out.json", "--csv", "out.csv"});
  EXPECT_EQ(o.min_bytes, 1024u);
  EXPECT_EQ(o.max_bytes, 64u << 20);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.step_bytes, 4096u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 0);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::kFloat16});
  EXPECT_EQ(o.ops, std::vector<RedOp>{RedOp::kMax});
  EXPECT_EQ(o.root, 1);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.timeout_s, 30);
  EXPECT_EQ(o.backends, (std::vector<std::string>{"gloo", "ringreduce"}));
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_EQ(o.csv_path, "out.csv");
}

TEST(Options, AllTypesOpsAndCollectives) {
  const Options o = parse({"-d", "all", "-o", "all", "--coll", "all"});
  EXPECT_EQ(o.types.size(), 10u);
  EXPECT_EQ(o.ops.size(), 8u);  // sum prod max min avg band bor bxor
  EXPECT_EQ(parse({"-o", "bxor", "-o", "band"}).ops, (std::vector<RedOp>{RedOp::kBxor, RedOp::kBand}));
  EXPECT_EQ(o.collectives, all_collectives());
  EXPECT_EQ(parse({"--coll", "reducescatter", "--coll", "sendrecv"}).collectives,
            (std::vector<const Collective*>{&kReduceScatter, &kSendRecv}));
}

TEST(Options, SweepFollowsNcclTestsStepRule) {
  Options o = parse({"-b", "1K", "-e", "8K", "-f", "2"});
  EXPECT_EQ(sweep_sizes(o), (std::vector<std::size_t>{1024, 2048, 4096, 8192}));
  o = parse({"-b", "1K", "-e", "4000", "-i", "1K"});  // additive; stops at the last size <= -e
  EXPECT_EQ(sweep_sizes(o), (std::vector<std::size_t>{1024, 2048, 3072}));
  o = parse({"-b", "0", "-e", "1K", "-f", "2"});  // 0 never grows: one row, no endless loop
  EXPECT_EQ(sweep_sizes(o), std::vector<std::size_t>{0});
}

TEST(Options, AFlagGivenAgainKeepsTheLastValueOrCollectsEach) {
  const Options o = parse({"-b", "1K", "-b", "2K", "-e", "4K", "-d", "float", "--datatype=half"});
  EXPECT_EQ(o.min_bytes, 2048u);
  EXPECT_EQ(o.types, (std::vector<DataType>{DataType::kFloat32, DataType::kFloat16}));
}

TEST(Options, BadFlagsNameTheFault) {
  EXPECT_NE(usage_error({"-q", "1"}).find("unknown flag '-q'"), std::string::npos);
  EXPECT_NE(usage_error({"-b"}).find("--minbytes needs a value"), std::string::npos);
  EXPECT_NE(usage_error({"--bogus=1"}).find("unknown flag '--bogus'"), std::string::npos);
  EXPECT_NE(usage_error({"-b1K", "--maxbytes=2K", "-f", "2"}).find("(no error)"), std::string::npos);
  EXPECT_NE(usage_error({"-b", "12Q"}).find("-b takes a size"), std::string::npos);
  EXPECT_NE(usage_error({"-n", "0"}).find("-n must be between 1"), std::string::npos);
  EXPECT_NE(usage_error({"-n", "ten"}).find("-n takes an integer"), std::string::npos);
  EXPECT_NE(usage_error({"-c", "2"}).find("-c takes 0 or 1"), std::string::npos);
  EXPECT_NE(usage_error({"-d", "float8"}).find("unknown datatype 'float8'"), std::string::npos);
  EXPECT_NE(usage_error({"-o", "xor"}).find("unknown op 'xor'"), std::string::npos);
  EXPECT_NE(usage_error({"--coll", "hypercube"}).find("unknown collective 'hypercube'"), std::string::npos);
  EXPECT_NE(usage_error({"-b", "2M", "-e", "1M"}).find("larger than -e"), std::string::npos);
  EXPECT_NE(usage_error({"stray"}).find("unexpected argument 'stray'"), std::string::npos);
}

}  // namespace
}  // namespace rrbench
