#pragma once
// rr-run's command line: what it takes, how it is checked, and its usage text.

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"

namespace rr::run {

// Local ranks only: a few thousand already exhausts the default fd limit (two
// pipes per rank), so anything larger is a typo.
inline constexpr long kMaxRanks = 4096;

// The variables rr-run owns; -x may not set them (it would break rendezvous).
inline constexpr const char* kLauncherVariables[] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};

extern const char kUsage[];

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  int nranks = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one
  int grace_ms = 2000;
  std::optional<double> timeout_s;
  bool tag_output = true;
  BindTo bind_to = BindTo::kNone;
  bool enable_recovery = false;  // a failed rank does not stop the others
  std::vector<std::pair<std::string, std::string>> extra_env;  // -x, in order
  std::vector<std::string> command;
  bool help = false;
};

// Options from argv; UsageError names what is wrong.
Options parse_args(int argc, char** argv);

}  // namespace rr::run
