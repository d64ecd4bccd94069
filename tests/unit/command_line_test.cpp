// The tools' shared command line (tools/common/command_line.hpp): the values
// a tool reads itself after parse_or_exit (a number >= 0, a whole number
// exact past 2^53, one in a range), and the exit that names the flag with the usage, as a
// bad flag does.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "command_line.hpp"

namespace {

constexpr char kUsage[] = "usage: tool [--seconds S] [--seed N]\n";

struct Parsed {
  std::string seconds, seed;
  rr::tools::CommandLine command_line{"tool"};
  explicit Parsed(std::initializer_list<const char*> args) {
    command_line.app.add_option("--seconds", seconds);
    command_line.app.add_option("--seed", seed);
    std::vector<const char*> argv{"tool"};
    argv.insert(argv.end(), args.begin(), args.end());
    command_line.parse_or_exit(static_cast<int>(argv.size()), argv.data(), kUsage);
  }
};

TEST(CommandLine, ReadsNumbersAndWholeNumbers) {
  Parsed p({"--seconds", "2.5", "--seed", "18446744073709551615"});
  EXPECT_EQ(p.command_line.number("--seconds", p.seconds), 2.5);
  EXPECT_EQ(p.command_line.whole("--seed", p.seed), UINT64_MAX);  // exact, past 2^53
  EXPECT_EQ(p.command_line.number("--seconds", "0"), 0.0);
}

TEST(CommandLineDeathTest, ABadValueExitsNamingTheFlagWithTheUsage) {
  Parsed p({});
  EXPECT_EXIT(p.command_line.number("--seconds", "x"), testing::ExitedWithCode(2),
              "tool: --seconds takes a number, not 'x'\nusage: tool");
  EXPECT_EXIT(p.command_line.number("--seconds", "-1"), testing::ExitedWithCode(2), "--seconds takes a number");
  EXPECT_EXIT(p.command_line.number("--seconds", ""), testing::ExitedWithCode(2), "--seconds takes a number");
  EXPECT_EXIT(p.command_line.whole("--seed", "-1"), testing::ExitedWithCode(2), "--seed takes a whole number, not '-1'");
  EXPECT_EXIT(p.command_line.whole("--seed", "1.5"), testing::ExitedWithCode(2), "--seed takes a whole number");
  EXPECT_EXIT(p.command_line.whole("--seed", "18446744073709551616"), testing::ExitedWithCode(2),
              "--seed takes a whole number");
  EXPECT_EQ(p.command_line.whole("--steps", "9", 1, 9), 9u);
  EXPECT_EXIT(p.command_line.whole("--steps", "0", 1, 9), testing::ExitedWithCode(2),
              "tool: --steps takes 1 to 9, not '0'\nusage: tool");
  EXPECT_EXIT(p.command_line.whole("--steps", "10", 1, 9), testing::ExitedWithCode(2), "--steps takes 1 to 9, not '10'");
  EXPECT_EXIT(p.command_line.exit_usage("--steps takes 1 to 9"), testing::ExitedWithCode(2),
              "tool: --steps takes 1 to 9\nusage: tool");
}

TEST(CommandLineDeathTest, AnUnknownFlagExitsWithTheUsage) {
  EXPECT_EXIT(Parsed({"--bogus", "1"}), testing::ExitedWithCode(2), "tool: unknown flag '--bogus'\nusage: tool");
}

}  // namespace
