#include "options.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "command_line.hpp"

namespace rrbench {

const char kUsage[] =
    "usage: rr-bench [options]   (run under rr-run -n N, or mpirun -np N)\n"
    "\n"
    "nccl-tests' flags (sizes take K, M, G suffixes, powers of 1024):\n"
    "  -b, --minbytes SIZE      smallest size (default 32M)\n"
    "  -e, --maxbytes SIZE      largest size (default 32M)\n"
    "  -i, --stepbytes SIZE     additive step between sizes, when -f is 1 (default 1M)\n"
    "  -f, --stepfactor N       multiplicative step between sizes (default 1: use -i)\n"
    "  -n, --iters N            timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N     untimed iterations before them (default 5)\n"
    "  -c, --check 0|1          check every result against a double-precision reference (default 1)\n"
    "  -d, --datatype TYPE      int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all (default float)\n"
    "  -o, --op OP              sum prod max min avg band bor bxor, or all (default sum; the bitwise\n"
    "                           ops run on integer types only)\n"
    "  -r, --root N             root rank of rooted collectives (default 0)\n"
    "  -z, --blocking 0|1       wait for each call to complete (host buffers: every call already does)\n"
    "  -T, --timeout SECONDS    fail a size that takes longer than this, exit 124 (default 0: none)\n"
    "\n"
    "rr-bench's own:\n"
    "  --backend NAME           ringreduce, mpi (= mpi-default + mpi-ring + mpi-alg5), gloo (= gloo-ring + gloo-ringchunked),\n"
    "                           nccl (a GPU per rank; skipped, saying why, without), one of those variants,\n"
    "                           or all (every built one this launcher can run);\n"
    "                           repeatable: the backends run one after another on each size (default ringreduce)\n"
    "  --coll NAME              allreduce reducescatter allgather broadcast reduce alltoall sendrecv, or all\n"
    "                           (default allreduce); repeatable\n"
    "  --json FILE              also write the results as JSON\n"
    "  --csv FILE               also write the results as CSV\n"
    "  --gloo-store DIR         directory of Gloo's FileStore (default: one per job under $TMPDIR or /tmp)\n"
    "  --list-backends          print the backends this rr-bench was built with, and exit\n"
    "  -h, --help               print this help, and exit\n"
    "\n"
    "exit status: 0 when every result was correct; 1 when a result was wrong or a\n"
    "backend failed; 2 on a bad command line; 124 when -T expired.\n";

namespace {

long parse_integer(const std::string& flag, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError(flag + " takes an integer, not '" + text + "'");
  }
  if (value < min || value > max) {
    throw UsageError(flag + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", not " +
                     text);
  }
  return value;
}

bool parse_bool(const std::string& flag, const std::string& text) {
  if (text == "0") return false;
  if (text == "1") return true;
  throw UsageError(flag + " takes 0 or 1, not '" + text + "'");
}

// The values of a repeatable choice flag (-d, -o) in order: "all" stands
// for every one (replacing those before it), another is read by `parse`, or
// refused naming the flag and the `known` choices.
template <typename T, std::size_t N>
std::vector<T> choices(const char* flag, const char* what, const std::vector<std::string>& values,
                       const T (&all)[N], bool (*parse)(const std::string&, T*), const char* known) {
  std::vector<T> chosen;
  for (const std::string& value : values) {
    if (value == "all") {
      chosen.assign(std::begin(all), std::end(all));
      continue;
    }
    T choice;
    if (!parse(value, &choice)) {
      throw UsageError(std::string(flag) + ": unknown " + what + " '" + value + "' (" + known + ")");
    }
    chosen.push_back(choice);
  }
  return chosen;
}

}  // namespace

std::size_t parse_size(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  double scale = 1;
  switch (*end) {
    case 'K': case 'k': scale = 1024.0, ++end; break;
    case 'M': case 'm': scale = 1024.0 * 1024, ++end; break;
    case 'G': case 'g': scale = 1024.0 * 1024 * 1024, ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || !(value >= 0) ||
      !std::isfinite(value)) {
    throw UsageError(flag + " takes a size such as 4096, 64K, 32M or 1G, not '" + text + "'");
  }
  const double bytes = value * scale;
  if (bytes > 1e15) throw UsageError(flag + " " + text + " is larger than any buffer this machine can hold");
  return static_cast<std::size_t>(bytes);
}

Options parse_options(int argc, const char* const* argv) {
  // The flags' texts, read below in the order nccl-tests documents them; a
  // repeatable one collects every value given.
  std::string minbytes, maxbytes, stepbytes, stepfactor, iters, warmup, check, root, blocking, timeout;
  std::vector<std::string> types, ops, collectives;
  Options options;
  rr::tools::CommandLine command_line("rr-bench");
  CLI::App& app = command_line.app;
  app.add_flag("-h,--help", options.help);
  app.add_flag("--list-backends", options.list_backends);
  app.add_option("-b,--minbytes", minbytes);
  app.add_option("-e,--maxbytes", maxbytes);
  app.add_option("-i,--stepbytes", stepbytes);
  app.add_option("-f,--stepfactor", stepfactor);
  app.add_option("-n,--iters", iters);
  app.add_option("-w,--warmup_iters", warmup);
  app.add_option("-c,--check", check);
  app.add_option("-d,--datatype", types);
  app.add_option("-o,--op", ops);
  app.add_option("-r,--root", root);
  app.add_option("-z,--blocking", blocking);
  app.add_option("-T,--timeout", timeout);
  app.add_option("--backend", options.backends);
  app.add_option("--coll", collectives);
  app.add_option("--json", options.json_path);
  app.add_option("--csv", options.csv_path);
  app.add_option("--gloo-store", options.gloo_store);
  try {
    command_line.parse(argc, argv);
  } catch (const rr::tools::CommandLineError& e) {
    throw UsageError(e.what());
  }
  const auto given = [&](const char* name) { return command_line.given(name); };
  if (given("-b")) options.min_bytes = parse_size("-b", minbytes);
  if (given("-e")) options.max_bytes = parse_size("-e", maxbytes);
  if (given("-i")) options.step_bytes = parse_size("-i", stepbytes);
  if (given("-f")) options.step_factor = static_cast<std::size_t>(parse_integer("-f", stepfactor, 1, 1 << 20));
  if (given("-n")) options.iters = static_cast<int>(parse_integer("-n", iters, 1, INT_MAX));
  if (given("-w")) options.warmup_iters = static_cast<int>(parse_integer("-w", warmup, 0, INT_MAX));
  if (given("-c")) options.check = parse_bool("-c", check);
  if (given("-r")) options.root = static_cast<int>(parse_integer("-r", root, 0, INT_MAX));
  if (given("-z")) options.blocking = parse_bool("-z", blocking);
  if (given("-T")) options.timeout_s = static_cast<int>(parse_integer("-T", timeout, 0, 24 * 3600));
  if (!types.empty()) {
    options.types = choices("-d", "datatype", types, kAllTypes, parse_type,
                            "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all");
  }
  if (!ops.empty()) options.ops = choices("-o", "op", ops, kAllOps, parse_op, "sum prod max min avg band bor bxor, or all");
  for (const std::string& value : collectives) {
    if (value == "all") {
      options.collectives = all_collectives();
    } else if (const Collective* coll = find_collective(value)) {
      options.collectives.push_back(coll);
    } else {
      std::string known;
      for (const Collective* c : all_collectives()) known += std::string(c->name) + " ";
      throw UsageError("--coll: unknown collective '" + value + "' (rr-bench runs: " + known + "or all)");
    }
  }
  if (options.min_bytes > options.max_bytes) {
    throw UsageError("-b (" + std::to_string(options.min_bytes) + " bytes) is larger than -e (" +
                     std::to_string(options.max_bytes) + " bytes)");
  }
  if (options.step_factor == 1 && options.step_bytes == 0 && options.min_bytes != options.max_bytes) {
    throw UsageError("-i 0 with -f 1 never reaches -e: give -f > 1 or -i > 0");
  }
  if (options.collectives.empty()) options.collectives.push_back(&kAllReduce);
  if (options.backends.empty()) options.backends.push_back("ringreduce");
  return options;
}

std::vector<std::size_t> sweep_sizes(const Options& options) {
  std::vector<std::size_t> sizes;
  for (std::size_t size = options.min_bytes; size <= options.max_bytes;) {
    sizes.push_back(size);
    const std::size_t next = options.step_factor > 1 ? size * options.step_factor : size + options.step_bytes;
    if (next <= size) break;  // -b 0 with -f, or overflow: nothing further to reach
    size = next;
  }
  return sizes;
}

}  // namespace rrbench
