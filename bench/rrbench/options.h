// rr-bench's command line: nccl-tests' flags with their meaning and defaults,
// plus the backend, collective and output-file options.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"
#include "dtype.h"

namespace rrbench {

struct Options {
  std::size_t min_bytes = std::size_t{32} << 20;  // -b
  std::size_t max_bytes = std::size_t{32} << 20;  // -e
  std::size_t step_bytes = std::size_t{1} << 20;  // -i: additive step, used when -f is 1
  std::size_t step_factor = 1;                    // -f: multiplicative step when > 1
  int iters = 20;                                 // -n
  int warmup_iters = 5;                           // -w
  bool check = true;                              // -c
  std::vector<DataType> types = {DataType::kFloat32};  // -d
  std::vector<RedOp> ops = {RedOp::kSum};              // -o
  int root = 0;                                   // -r
  bool blocking = false;                          // -z
  int timeout_s = 0;                              // -T: 0 = none
  std::vector<std::string> backends;              // --backend, as given (expanded in main)
  std::vector<const Collective*> collectives;     // --coll
  std::string json_path;                          // --json
  std::string csv_path;                           // --csv
  std::string gloo_store;                         // --gloo-store: FileStore directory
  bool help = false;
  bool list_backends = false;
};

// A command line rr-bench cannot run; main prints what() and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError naming the flag and the value at fault.
Options parse_options(int argc, const char* const* argv);

// "1K", "64M", "1.5G", "4096": bytes (K = 1024). Throws UsageError.
std::size_t parse_size(const std::string& flag, const std::string& text);

// The sizes of the sweep, nccl-tests' rule: min, then *factor (factor > 1)
// or +step, while <= max.
std::vector<std::size_t> sweep_sizes(const Options& options);

extern const char kUsage[];

}  // namespace rrbench
