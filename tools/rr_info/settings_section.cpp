// Every RR_* variable the engine reads, with the value a communicator made
// now would use and where it came from: "default", "env RR_...", or
// "config" (a field of rrConfig_t; rr-info's --config flags set them).
// Settings (comm/settings.hpp) resolves most of them; the rest are read where
// they are used (the log, the wait policy, the bootstrap, the CUDA copy
// engine), from the environment only, and are listed after them.

#include <strings.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "build_features.hpp"
#include "comm/settings.hpp"
#include "comm/settings_table.hpp"
#include "common/env.hpp"
#include "common/log.hpp"
#include "exec/wait_policy.hpp"
#include "sections.hpp"

extern char** environ;

namespace rr::info {

namespace {

constexpr const char* kEnvOnly = "-";  // the rrConfig_t column of a variable without a field

std::string env_source(const char* name) { return env_str(name) ? std::string("env ") + name : "default"; }

const char* scope_name(SettingSpec::Scope scope) {
  switch (scope) {
    case SettingSpec::Scope::kCommunicator: return "per communicator";
    case SettingSpec::Scope::kProcess: return "per process";
    case SettingSpec::Scope::kBootstrap: return "by each rendezvous";
    case SettingSpec::Scope::kCuda: return "per CUDA copy engine";
  }
  return "?";
}

// The rows of the table's communicator settings, as `s` has them.
void add_settings_rows(const Settings& s, Table* table) {
  for (const SettingSpec& spec : setting_specs()) {
    if (!spec.value) continue;
    table->rows.push_back({spec.variable, spec.value(s), spec.source(spec, s).text(),
                           spec.config_field ? spec.config_field : kEnvOnly});
  }
}

// The engine's process-wide log level; a value it does not recognise leaves WARN.
std::string debug_level_value() {
  const LogLevel level = log_level();
  const char* name = level == LogLevel::kTrace ? "TRACE" : level == LogLevel::kInfo ? "INFO" : "WARN";
  const char* set = env_str("RR_DEBUG");
  if (set && level == LogLevel::kWarn && strcasecmp(set, "WARN") != 0 && std::strcmp(set, "0") != 0) {
    return std::string(name) + " ('" + set + "' is not WARN, INFO, TRACE, 0, 1 or 2)";
  }
  return name;
}

// An environment-only variable's value, or what its absence means.
std::string env_or(const char* name, const char* unset) {
  const char* set = env_str(name);
  return set ? set : unset;
}

// The value of a variable read outside Settings, where it is read.
std::string env_only_value(const std::string& name) {
  if (name == "RR_WAIT_POLICY") return exec::wait_mode_name(exec::wait_mode());
  if (name == "RR_DEBUG") return debug_level_value();
  if (name == "RR_GPU_STREAM_MEMOPS") return env_or("RR_GPU_STREAM_MEMOPS", "auto");
  if (name == "RR_BOOTSTRAP_HOST") return env_or("RR_BOOTSTRAP_HOST", "(first up non-loopback IPv4 address)");
  if (name == "RR_SOCKET_IFNAME") return env_or("RR_SOCKET_IFNAME", "(any interface)");
  if (name == "RR_BIND_ADDR") return env_or("RR_BIND_ADDR", "(the rendezvous address)");
  if (name == "RR_AUTH_TOKEN") {
    // A secret: say only whether it is there.
    const char* token = env_str("RR_AUTH_TOKEN");
    return token ? "(set, " + std::to_string(std::strlen(token)) + " bytes, not shown)" : "(none)";
  }
  return "(read elsewhere)";
}

void add_env_only_rows(Table* table) {
  for (const SettingSpec& spec : setting_specs()) {
    if (spec.value) continue;
    // RR_DEBUG's config field (debug_level) is kept but changes nothing: the log is the process's.
    table->rows.push_back({spec.variable, env_only_value(spec.variable), env_source(spec.variable), kEnvOnly});
  }
}

// What the table says of each: its default, where it is read, what it does.
Table defaults_table() {
  Table table{"defaults", {"variable", "default", "read", "summary"}, {}};
  for (const SettingSpec& spec : setting_specs()) {
    table.rows.push_back({spec.variable, spec.default_text, scope_name(spec.scope), spec.summary});
  }
  return table;
}

}  // namespace

Section settings_section(const rrConfig_t& config, bool* ok) {
  Section s;
  s.title = "Settings";
  s.key = "settings";
  Table table{"variables", {"variable", "value", "source", "rrConfig_t field"}, {}};
  Settings settings;
  const Status resolved = resolve_settings(&config, &settings);
  *ok = resolved.ok();
  if (resolved.ok()) {
    add_settings_rows(settings, &table);
  } else {
    s.notes.push_back("a communicator would refuse these settings: " + resolved.message());
  }
  add_env_only_rows(&table);

  // RR_* variables that are set but that the engine never reads (misspelt, or another tool's).
  std::set<std::string> known;
  for (const auto& row : table.rows) known.insert(row[0]);
  for (char** v = environ; *v; ++v) {
    if (std::strncmp(*v, "RR_", 3) != 0) continue;
    const std::string name(*v, std::strcspn(*v, "="));
    if (!resolved.ok() || known.count(name)) continue;
    s.notes.push_back(name + " is set, but the engine reads no such variable");
  }
  if (!kCuda) s.notes.push_back("RR_GPU_* take effect only in a CUDA build; this one has none");
  s.tables.push_back(std::move(table));
  s.tables.push_back(defaults_table());
  return s;
}

}  // namespace rr::info
