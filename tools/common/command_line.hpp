#pragma once
// How the project's tools (rr-run, rr-info, rr-sim, rr-bench,
// rr-allreduce-bench) read their command lines: CLI11 takes the flags apart
// (-b 1K, -b1K, --minbytes=1K, a flag given again), and every tool words the
// same faults the same way: "unknown flag '-q'", "--maxbytes needs a value",
// "unexpected argument 'x' (flags start with -)". Each tool reads the values
// itself (sizes with suffixes, ranges), naming the flag, and prints its own
// usage text for -h / --help.

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace rr::tools {

class CommandLineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A tool's command line: its flags are added to `app`, then parse() reads
// argv into them. -h / --help are the tool's to add (it prints its own usage
// text).
class CommandLine {
 public:
  explicit CommandLine(const std::string& tool) : app(tool, tool) {
    app.set_help_flag();
    app.allow_extras(true);
  }

  // Reads argv into the flags added; throws CommandLineError. With
  // `stop_at_program` (rr-run), the first argument that is not a flag, and
  // everything after it, are left in app.remaining() for the caller.
  void parse(int argc, const char* const* argv, bool stop_at_program = false) {
    if (stop_at_program) app.prefix_command(true);
    // A flag takes the one value after it. Given again, a repeatable one
    // (a vector: -x A=1 -x B=2) collects each value, without swallowing the
    // words that follow it (rr-run's program); any other keeps the last.
    for (CLI::Option* option : app.get_options()) {
      if (option->get_expected_max() > 1) {
        option->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      } else if (option->get_expected_max() == 1) {
        option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
      }
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::ArgumentMismatch& e) {
      // "--maxbytes: 1 required TEXT missing": the flag CLI11 names first.
      const std::string what = e.what();
      throw CommandLineError(what.substr(0, what.find(':')) + " needs a value");
    } catch (const CLI::ParseError& e) {
      throw CommandLineError(e.what());
    }
    if (stop_at_program) return;
    for (const std::string& extra : app.remaining()) {
      if (!extra.empty() && extra[0] == '-') {
        throw CommandLineError("unknown flag '" + extra.substr(0, extra.find('=')) + "'");
      }
      throw CommandLineError("unexpected argument '" + extra + "' (flags start with -)");
    }
  }
  // For a tool that reads its whole command line here (rr-info, rr-sim,
  // rr-allreduce-bench, soak_rank): adds -h / --help, reads argv, and exits
  // on a bad command line ("<tool>: <why>" and `usage` on stderr, status 2)
  // or on -h / --help (`usage` on stdout, status 0).
  void parse_or_exit(int argc, const char* const* argv, const char* usage) {
    usage_ = usage;
    app.add_flag("-h,--help", help_);
    try {
      parse(argc, argv);
    } catch (const CommandLineError& e) {
      std::fprintf(stderr, "%s: %s\n%s", app.get_name().c_str(), e.what(), usage);
      std::exit(2);
    }
    if (help_) {
      std::fputs(usage, stdout);
      std::exit(0);
    }
  }

  // Whether the flag named `name` (any of its names) was given.
  bool given(const std::string& name) const { return app.count(name) > 0; }

  // After parse_or_exit: exits as a bad command line does there
  // ("<tool>: <why>", the usage, status 2), for a value the tool found bad.
  [[noreturn]] void exit_usage(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\n%s", app.get_name().c_str(), why.c_str(), usage_ ? usage_ : "");
    std::exit(2);
  }
  // The values a tool that used parse_or_exit reads itself, naming the flag
  // when they are not: a number >= 0 ("--seconds takes a number, not 'x'"),
  // and a whole number, exact past 2^53 (a seed), or one in a range.
  double number(const std::string& flag, const std::string& text) const {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v >= 0)) exit_usage(flag + " takes a number, not '" + text + "'");
    return v;
  }
  uint64_t whole(const std::string& flag, const std::string& text) const {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || text[0] == '-' || errno == ERANGE) {
      exit_usage(flag + " takes a whole number, not '" + text + "'");
    }
    return static_cast<uint64_t>(v);
  }
  // A whole number from `lo` to `hi` ("-n takes 2 to 256, not '1'").
  uint64_t whole(const std::string& flag, const std::string& text, uint64_t lo, uint64_t hi) const {
    const uint64_t v = whole(flag, text);
    if (v < lo || v > hi) {
      exit_usage(flag + " takes " + std::to_string(lo) + " to " + std::to_string(hi) + ", not '" + text + "'");
    }
    return v;
  }

  CLI::App app;

 private:
  bool help_ = false;  // parse_or_exit's -h / --help
  const char* usage_ = nullptr;  // parse_or_exit's usage text
};

}  // namespace rr::tools
