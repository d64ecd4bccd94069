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
#include "common/env.hpp"
#include "common/log.hpp"
#include "exec/wait_policy.hpp"
#include "sections.hpp"
#include "topo/link_speed.hpp"

extern char** environ;

namespace rr::info {

namespace {

constexpr const char* kEnvOnly = "-";  // the rrConfig_t column of a variable without a field

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

std::string env_source(const char* name) { return env_str(name) ? std::string("env ") + name : "default"; }

// The cost model's three variables share Settings::model_source (the last one
// set); each row names its own variable.
void add_model_rows(const algo::CostModel& model, Table* table) {
  table->rows.push_back({"RR_MODEL_ALPHA_US", number(model.alpha_s * 1e6), env_source("RR_MODEL_ALPHA_US"), kEnvOnly});
  table->rows.push_back({"RR_MODEL_REMOTE_ALPHA_US", number(model.remote_alpha() * 1e6),
                         env_source("RR_MODEL_REMOTE_ALPHA_US"), kEnvOnly});
  table->rows.push_back({"RR_MODEL_SLOT_ALPHA_US", number(model.slot_alpha_s * 1e6), env_source("RR_MODEL_SLOT_ALPHA_US"),
                         kEnvOnly});
  table->rows.push_back(
      {"RR_MODEL_MOVE_GBPS", number(1.0 / (model.beta_s_per_byte * 1e9)), env_source("RR_MODEL_MOVE_GBPS"), kEnvOnly});
  table->rows.push_back({"RR_MODEL_REDUCE_GBPS", number(1.0 / (model.gamma_s_per_byte * 1e9)),
                         env_source("RR_MODEL_REDUCE_GBPS"), kEnvOnly});
}

// The link rate the pipeline sizing assumes: the setting, else the fastest
// interface's reported speed (UCX_NET_DEVICES' if set), else the default.
std::string link_gbps_value(const Settings& s) {
  if (s.link_gbps > 0) return number(s.link_gbps);
  const topo::LinkSpeed link = topo::fastest_link(topo::ucx_net_devices());
  if (link.gbps > 0) return "auto (" + number(link.gbps) + " Gbit/s, " + link.device + ")";
  return "auto (no interface reports a speed: " + number(Settings::kDefaultLinkGbps) + ")";
}

void add_settings_rows(const Settings& s, Table* table) {
  auto& rows = table->rows;
  rows.push_back({"RR_CHUNK_BYTES", std::to_string(s.chunk_bytes), s.chunk_bytes_source.text(), "chunk_bytes"});
  // Auto: the default is a floor; init raises it to cover the round trip to a
  // ring neighbour on another host (comm/pipeline_sizing.cpp).
  rows.push_back({"RR_PIPELINE_DEPTH",
                  s.pipeline_depth_auto ? "auto (>= " + std::to_string(s.pipeline_depth) + ")"
                                        : std::to_string(s.pipeline_depth),
                  s.pipeline_depth_source.text(), "pipeline_depth"});
  rows.push_back({"RR_LINK_GBPS", link_gbps_value(s), s.link_gbps_source.text(), kEnvOnly});
  rows.push_back({"RR_TIMEOUT_MS", std::to_string(s.timeout_ms), s.timeout_ms_source.text(), "timeout_ms"});
  rows.push_back({"RR_CHECK_ARGUMENTS", s.check_arguments ? "1" : "0", s.check_arguments_source.text(), "check_arguments"});
  rows.push_back({"RR_ALGO", algo::algo_name(s.allreduce_algo), s.allreduce_algo_source.text(), kEnvOnly});
  rows.push_back({"RR_RING_ORDER", s.ring_order_by_topology ? "topology" : "rank", s.ring_order_source.text(), kEnvOnly});
  rows.push_back({"RR_SAME_HOST", s.same_host_shm ? "shm" : "ucx", s.same_host_source.text(), kEnvOnly});
  rows.push_back({"RR_SHM_SLOT_BYTES", std::to_string(s.shm_slot_bytes), s.shm_slot_bytes_source.text(), kEnvOnly});
  rows.push_back({"RR_SHM_SLOTS", std::to_string(s.shm_slots), s.shm_slots_source.text(), kEnvOnly});
  rows.push_back({"RR_SHM_BOARD_BYTES", std::to_string(s.shm_board_bytes), s.shm_board_bytes_source.text(), kEnvOnly});
  add_model_rows(s.model, table);
  rows.push_back({"RR_GPU_SEGMENT_BYTES", std::to_string(s.gpu_segment_bytes), s.gpu_segment_bytes_source.text(),
                  "gpu_segment_bytes"});
  rows.push_back({"RR_GPU_REDUCE", s.gpu_reduce_on_device ? "device" : "host", s.gpu_reduce_source.text(), kEnvOnly});
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

void add_env_only_rows(Table* table) {
  auto& rows = table->rows;
  rows.push_back({"RR_WAIT_POLICY", exec::wait_mode_name(exec::wait_mode()), env_source("RR_WAIT_POLICY"), kEnvOnly});
  rows.push_back({"RR_DEBUG", debug_level_value(), env_source("RR_DEBUG"), kEnvOnly});
  rows.push_back({"RR_GPU_STREAM_MEMOPS", env_or("RR_GPU_STREAM_MEMOPS", "auto"), env_source("RR_GPU_STREAM_MEMOPS"),
                  kEnvOnly});
  rows.push_back({"RR_BOOTSTRAP_HOST", env_or("RR_BOOTSTRAP_HOST", "(first up non-loopback IPv4 address)"),
                  env_source("RR_BOOTSTRAP_HOST"), kEnvOnly});
  rows.push_back({"RR_SOCKET_IFNAME", env_or("RR_SOCKET_IFNAME", "(any interface)"), env_source("RR_SOCKET_IFNAME"),
                  kEnvOnly});
  rows.push_back({"RR_BIND_ADDR", env_or("RR_BIND_ADDR", "(the rendezvous address)"), env_source("RR_BIND_ADDR"),
                  kEnvOnly});
  // A secret: say only whether it is there.
  const char* token = env_str("RR_AUTH_TOKEN");
  rows.push_back({"RR_AUTH_TOKEN",
                  token ? "(set, " + std::to_string(std::strlen(token)) + " bytes, not shown)" : "(none)",
                  env_source("RR_AUTH_TOKEN"), kEnvOnly});
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
  return s;
}

}  // namespace rr::info
