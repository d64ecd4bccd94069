// rr-info: what this ringreduce is and what it would do here, as ucx_info
// and NCCL_DEBUG=INFO tell their users: the build's version and features,
// the UCX transports and devices, the machine's topology, and every RR_*
// setting with its value and where that came from.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/settings_table.hpp"
#include "command_line.hpp"
#include "sections.hpp"

namespace {

constexpr const char* kUsage =
    "usage: rr-info [--json] [--config FIELD=VALUE]...\n"
    "\n"
    "Prints ringreduce's version and build features, the UCX transports and\n"
    "devices, the machine's topology (hwloc), and every RR_* setting with its\n"
    "value and source: default, env RR_..., or config.\n"
    "\n"
    "  --json                 the same as one JSON object (every value a string)\n"
    "  --config FIELD=VALUE   set a field of the rrConfig_t the settings are resolved\n"
    "                         with, as a program would pass it to rrCommInitRank;\n"
    "                         repeatable. FIELD: chunk_bytes, pipeline_depth,\n"
    "                         timeout_ms, check_arguments, gpu_segment_bytes\n"
    "                         (VALUE a decimal integer). A field wins over RR_*.\n"
    "                         debug_level is not offered: the engine's log level\n"
    "                         is process-wide, from RR_DEBUG.\n"
    "  --help                 this text\n"
    "\n"
    "Exit status: 0; 1 when the settings would be refused (a bad RR_* value,\n"
    "named in the output); 2 for a bad command line.\n";

// A decimal integer in [min, max], the whole text.
bool parse_integer(const char* text, long long min, long long max, long long* value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return false;
  *value = v;
  return true;
}

// One --config FIELD=VALUE into *config; false with *why for a bad one. The
// fields are the settings table's (comm/settings_table.cpp); the ranges
// here are the C types', resolve_settings() checks the engine's own.
bool set_config_field(const std::string& assignment, rrConfig_t* config, std::string* why) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    *why = "--config " + assignment + ": expected FIELD=VALUE";
    return false;
  }
  const std::string field = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  long long value = 0;
  if (!parse_integer(text.c_str(), 0, 0x7fffffff, &value)) {
    *why = "--config " + assignment + ": expected a decimal integer from 0 to 2147483647";
    return false;
  }
  std::string fields;
  for (const rr::SettingSpec& spec : rr::setting_specs()) {
    if (!spec.to_config) continue;
    if (field == spec.config_field) {
      spec.to_config(config, value);
      return true;
    }
    fields += std::string(fields.empty() ? "" : ", ") + spec.config_field;
  }
  *why = "--config: no field '" + field + "' (" + fields + ")";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::vector<std::string> assignments;
  rr::tools::CommandLine command_line("rr-info");
  command_line.app.add_flag("--json", json);
  command_line.app.add_option("--config", assignments);
  command_line.parse_or_exit(argc, argv, kUsage);
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  for (const std::string& assignment : assignments) {
    std::string why;
    if (!set_config_field(assignment, &config, &why)) {
      std::fprintf(stderr, "rr-info: %s\n", why.c_str());
      return 2;
    }
  }

  rr::topo::Machine machine;
  const rr::Status read = rr::topo::describe_machine(&machine);
  bool settings_ok = true;
  std::vector<rr::info::Section> sections;
  sections.push_back(rr::info::build_section());
  sections.push_back(rr::info::ucx_section(machine.nics, read.ok()));
  sections.push_back(rr::info::topology_section(read, machine));
  sections.push_back(rr::info::settings_section(config, &settings_ok));
  if (json) {
    rr::info::print_json(sections, stdout);
  } else {
    rr::info::print_text(sections, stdout);
  }
  return settings_ok ? 0 : 1;
}
