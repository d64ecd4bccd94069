#include "comm/settings.hpp"

#include <cstddef>
#include <string>

#include "comm/settings_table.hpp"
#include "common/log.hpp"
#include "exec/wait_policy.hpp"

namespace rr {

std::string Source::text() const {
  switch (kind) {
    case Kind::kDefault: return "default";
    case Kind::kEnvironment: return "env " + detail;
    case Kind::kConfig: return "config";
    case Kind::kMeasured: return "auto: " + detail;
    case Kind::kPeer: return detail;
  }
  return "default";
}

Status resolve_settings(const rrConfig_t* config, Settings* out) {
  Settings s;
  // Every per-communicator variable, as its row of the table parses it.
  for (const SettingSpec& spec : setting_specs()) {
    if (spec.from_env) RR_RETURN_IF_ERROR(spec.from_env(spec, &s));
  }
  exec::WaitMode wait_mode;  // process-wide: exec/ reads it, here a bad value is refused
  RR_RETURN_IF_ERROR(exec::read_wait_mode(&wait_mode));
  s.debug_level = static_cast<int>(log_level());

  if (config) {
    // A caller built against an older, smaller rrConfig_t has fields we must not read.
    if (config->magic != RR_CONFIG_MAGIC || config->size < offsetof(rrConfig_t, chunk_bytes)) {
      return InvalidArgument("config: not initialised with RR_CONFIG_INITIALIZER (bad magic or size)");
    }
    // Every field, as its row of the table reads it.
    for (const SettingSpec& spec : setting_specs()) {
      if (spec.from_config) RR_RETURN_IF_ERROR(spec.from_config(spec, *config, &s));
    }
  }
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace rr
