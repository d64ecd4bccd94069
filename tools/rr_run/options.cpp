#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "command_line.hpp"

namespace rr::run {

const char kUsage[] =
    "usage: rr-run -n N [options] [--] program [args...]\n"
    "\n"
    "Start N local ranks of program with the torch.distributed env:// variables\n"
    "MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE.\n"
    "If a rank fails, the others get SIGTERM, then SIGKILL after the grace period.\n"
    "SIGUSR1 is forwarded to every rank (ringreduce ranks then dump their state);\n"
    "ranks start with SIGUSR1 ignored, so it cannot kill one that has no handler.\n"
    "\n"
    "options:\n"
    "  -n, -np, --nproc N   number of ranks (required, 1 to 4096)\n"
    "  --master-addr ADDR   rendezvous address (default 127.0.0.1)\n"
    "  --master-port PORT   rendezvous port (default: a free port picked on ADDR)\n"
    "  -x VAR=VALUE         set VAR in every rank (repeatable); -x VAR passes on\n"
    "                       rr-run's own value of VAR\n"
    "  --tag-output         prefix each output line with \"[rank] \" (default)\n"
    "  --no-tag-output      pass lines through untagged (still whole lines)\n"
    "  --timeout SECONDS    stop all ranks after SECONDS and exit 124\n"
    "  --grace-ms MS        wait between SIGTERM and SIGKILL (default 2000)\n"
    "  --enable-recovery    a rank that fails does not stop the others (Open MPI's\n"
    "                       --enable-recovery, for programs that shrink it away:\n"
    "                       rrCommShrinkFailed); each failure is reported, and\n"
    "                       rr-run exits 0 when some rank exited 0\n"
    "  --bind-to none|core  none (default): each rank may run on every CPU\n"
    "                       rr-run may; core: rank r on the (r mod CPUs)-th of\n"
    "                       them alone, so neighbouring ranks run on different\n"
    "                       CPUs and none migrates (mpirun --bind-to core)\n"
    "  -h, --help           show this help\n"
    "\n"
    "Every rank also gets RR_AUTH_TOKEN, a random secret that admits it to the\n"
    "rendezvous, unless RR_AUTH_TOKEN is already set (here or with -x).\n"
    "\n"
    "exit status: 0 when every rank exits 0 (--enable-recovery: some rank); else the\n"
    "first failing rank's status\n"
    "(128+signal if it was killed); 124 on timeout; 126/127 when program cannot be\n"
    "executed / is not found; 128+signal when rr-run is interrupted; 2 on bad usage;\n"
    "1 when rr-run itself fails.\n";

namespace {

long parse_long(const std::string& option, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    throw UsageError("invalid value '" + text + "' for " + option + ": expected an integer from " +
                     std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

double parse_seconds(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // The upper bound keeps the deadline arithmetic in steady_clock's range.
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value <= 0 || value > 1e9) {
    throw UsageError("invalid value '" + text + "' for " + option +
                     ": expected a positive number of seconds");
  }
  return value;
}

bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::pair<std::string, std::string> parse_export(const std::string& text) {
  const auto eq = text.find('=');
  std::string name = text.substr(0, eq);
  if (!is_variable_name(name)) throw UsageError("-x " + text + ": '" + name + "' is not a variable name");
  for (const char* owned : kLauncherVariables) {
    if (name == owned) {
      std::string hint = name == "MASTER_ADDR"   ? " (use --master-addr)"
                         : name == "MASTER_PORT" ? " (use --master-port)"
                                                 : "";
      throw UsageError("-x " + text + ": rr-run sets " + name + " itself" + hint);
    }
  }
  if (eq != std::string::npos) return {name, text.substr(eq + 1)};
  // mpirun's -x VAR exports the launcher's own value.
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) throw UsageError("-x " + name + ": " + name + " is not set");
  return {name, value};
}

}  // namespace

Options parse_args(int argc, char** argv) {
  // mpirun's -np, a single-dash long option, is --nproc for CLI11; only
  // before the program (whose own arguments are its business).
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "-np") args[i] = "--nproc";
  }
  std::vector<const char*> words;
  for (const std::string& arg : args) words.push_back(arg.c_str());

  Options options;
  std::string nranks, master_port, grace_ms, timeout;
  std::vector<std::string> exports;
  bool no_tag_output = false;
  std::string bind_to;
  rr::tools::CommandLine command_line("rr-run");
  CLI::App& app = command_line.app;
  app.add_flag("-h,--help", options.help);
  app.add_option("-n,--nproc", nranks);
  app.add_option("--master-addr", options.master_addr);
  app.add_option("--master-port", master_port);
  app.add_option("--grace-ms", grace_ms);
  app.add_option("--timeout", timeout);
  app.add_option("-x", exports);
  app.add_flag("--tag-output", options.tag_output);
  app.add_flag("--no-tag-output", no_tag_output);
  app.add_option("--bind-to", bind_to);
  app.add_flag("--enable-recovery", options.enable_recovery);
  try {
    // Parsing stops at the program: what follows is its own.
    command_line.parse(static_cast<int>(words.size()), words.data(), /*stop_at_program=*/true);
  } catch (const rr::tools::CommandLineError& e) {
    throw UsageError(e.what());
  }
  if (options.help) return options;
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") {
    command.erase(command.begin());  // "--" ends rr-run's flags: the program follows, whatever its name
  } else if (!command.empty() && command.front().size() > 1 && command.front()[0] == '-') {
    throw UsageError("unknown option '" + command.front() + "'");
  }
  if (!command_line.given("-n")) throw UsageError("missing -n N (the number of ranks)");
  options.nranks = static_cast<int>(parse_long("-n", nranks, 1, kMaxRanks));
  if (command_line.given("--master-addr") && options.master_addr.empty()) {
    throw UsageError("--master-addr needs a non-empty address");
  }
  if (command_line.given("--master-port")) {
    options.master_port = static_cast<int>(parse_long("--master-port", master_port, 1, 65535));
  }
  if (command_line.given("--grace-ms")) {
    options.grace_ms = static_cast<int>(parse_long("--grace-ms", grace_ms, 0, 3'600'000));
  }
  if (command_line.given("--timeout")) options.timeout_s = parse_seconds("--timeout", timeout);
  for (const std::string& text : exports) options.extra_env.push_back(parse_export(text));
  if (no_tag_output) options.tag_output = false;
  if (command_line.given("--bind-to")) {
    if (bind_to == "none") {
      options.bind_to = BindTo::kNone;
    } else if (bind_to == "core") {
      options.bind_to = BindTo::kCore;
    } else {
      throw UsageError("invalid value '" + bind_to + "' for --bind-to: expected none or core");
    }
  }
  options.command = std::move(command);
  if (options.command.empty()) throw UsageError("no program given");
  return options;
}

}  // namespace rr::run
