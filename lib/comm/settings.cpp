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
    auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= config->size; };
    const bool has_chunk = has(offsetof(rrConfig_t, chunk_bytes), sizeof(config->chunk_bytes));
    const bool has_depth = has(offsetof(rrConfig_t, pipeline_depth), sizeof(config->pipeline_depth));
    const bool has_timeout = has(offsetof(rrConfig_t, timeout_ms), sizeof(config->timeout_ms));
    const bool has_debug = has(offsetof(rrConfig_t, debug_level), sizeof(config->debug_level));
    const bool has_check = has(offsetof(rrConfig_t, check_arguments), sizeof(config->check_arguments));
    const bool has_segment = has(offsetof(rrConfig_t, gpu_segment_bytes), sizeof(config->gpu_segment_bytes));
    // A byte size field: 0 keeps the default or the environment's value.
    auto bytes_field = [](const char* name, size_t value, size_t* to, Source* source) {
      if (value == 0) return Status::Ok();
      if (value < Settings::kMinChunkBytes || value > Settings::kMaxChunkBytes) {
        return InvalidArgument(std::string("config.") + name + "=" + std::to_string(value) + ": expected " +
                               std::to_string(Settings::kMinChunkBytes) + ".." +
                               std::to_string(Settings::kMaxChunkBytes));
      }
      *to = value, *source = Source::config();
      return Status::Ok();
    };
    if (has_chunk) {
      RR_RETURN_IF_ERROR(bytes_field("chunk_bytes", config->chunk_bytes, &s.chunk_bytes, &s.chunk_bytes_source));
    }
    if (has_depth && config->pipeline_depth != RR_CONFIG_UNDEF_INT) {
      if (config->pipeline_depth < 1 || config->pipeline_depth > Settings::kMaxPipelineDepth) {
        return InvalidArgument("config.pipeline_depth=" + std::to_string(config->pipeline_depth) +
                               ": expected 1.." + std::to_string(Settings::kMaxPipelineDepth));
      }
      s.pipeline_depth = config->pipeline_depth, s.pipeline_depth_auto = false, s.pipeline_depth_source = Source::config();
    }
    if (has_timeout && config->timeout_ms != RR_CONFIG_UNDEF_INT) {
      if (config->timeout_ms < 1) {
        return InvalidArgument("config.timeout_ms=" + std::to_string(config->timeout_ms) + ": must be >= 1");
      }
      s.timeout_ms = config->timeout_ms, s.timeout_ms_source = Source::config();
    }
    if (has_debug && config->debug_level != RR_CONFIG_UNDEF_INT) s.debug_level = config->debug_level;
    if (has_check && config->check_arguments != RR_CONFIG_UNDEF_INT) {
      if (config->check_arguments != 0 && config->check_arguments != 1) {
        return InvalidArgument("config.check_arguments=" + std::to_string(config->check_arguments) + ": expected 0 or 1");
      }
      s.check_arguments = config->check_arguments != 0, s.check_arguments_source = Source::config();
    }
    if (has_segment) {
      RR_RETURN_IF_ERROR(bytes_field("gpu_segment_bytes", config->gpu_segment_bytes, &s.gpu_segment_bytes,
                                     &s.gpu_segment_bytes_source));
    }
  }
  *out = std::move(s);
  return Status::Ok();
}

}  // namespace rr
