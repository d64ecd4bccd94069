#include "comm/settings.hpp"

#include <cstddef>
#include <cstdlib>
#include <string>

#include "common/env.hpp"
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

namespace {

// A positive number from the environment, times `scale`, into *value.
Status env_positive(const char* name, double scale, double* value, Source* source) {
  const char* text = env_str(name);
  if (!text) return Status::Ok();
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0) || v > 1e12) {
    return InvalidArgument(std::string(name) + "=" + text + ": expected a positive number");
  }
  *value = v * scale;
  *source = Source::environment(name);
  return Status::Ok();
}

// A rate in GB/s from the environment, as seconds per byte.
Status env_rate(const char* name, double* seconds_per_byte, Source* source) {
  double gbps = 0;
  Source from;
  RR_RETURN_IF_ERROR(env_positive(name, 1.0, &gbps, &from));
  if (!from.is_default()) *seconds_per_byte = 1.0 / (gbps * 1e9), *source = from;
  return Status::Ok();
}

// A variable that takes one of two words: *second = (value == second), and
// *source names it; both untouched when it is unset.
Status env_either(const char* name, const char* first, const char* second, bool* is_second, Source* source) {
  const char* text = env_str(name);
  if (!text) return Status::Ok();
  const std::string value = text;
  if (value != first && value != second) {
    return InvalidArgument(std::string(name) + "=" + value + ": expected " + first + " or " + second);
  }
  *is_second = value == second;
  *source = Source::environment(name);
  return Status::Ok();
}

}  // namespace

Status resolve_settings(const rrConfig_t* config, Settings* out) {
  Settings s;
  bool found = false;
  uint64_t size_value = 0;
  int64_t int_value = 0;

  RR_RETURN_IF_ERROR(env_size("RR_CHUNK_BYTES", Settings::kMinChunkBytes, Settings::kMaxChunkBytes,
                              &size_value, &found));
  if (found) s.chunk_bytes = size_value, s.chunk_bytes_source = Source::environment("RR_CHUNK_BYTES");
  const char* depth_text = env_str("RR_PIPELINE_DEPTH");
  if (depth_text && std::string(depth_text) == "auto") {
    s.pipeline_depth_source = Source::environment("RR_PIPELINE_DEPTH");  // as unset: sized at init
  } else {
    const Status depth = env_int("RR_PIPELINE_DEPTH", 1, Settings::kMaxPipelineDepth, &int_value, &found);
    if (!depth.ok()) return InvalidArgument(depth.message() + " or auto");
    if (found) {
      s.pipeline_depth = static_cast<int>(int_value), s.pipeline_depth_auto = false;
      s.pipeline_depth_source = Source::environment("RR_PIPELINE_DEPTH");
    }
  }
  RR_RETURN_IF_ERROR(env_positive("RR_LINK_GBPS", 1.0, &s.link_gbps, &s.link_gbps_source));
  RR_RETURN_IF_ERROR(env_int("RR_TIMEOUT_MS", 1, 7 * 24 * 3600 * 1000LL, &int_value, &found));
  if (found) s.timeout_ms = static_cast<int>(int_value), s.timeout_ms_source = Source::environment("RR_TIMEOUT_MS");
  RR_RETURN_IF_ERROR(env_int("RR_CHECK_ARGUMENTS", 0, 1, &int_value, &found));
  if (found) s.check_arguments = int_value != 0, s.check_arguments_source = Source::environment("RR_CHECK_ARGUMENTS");
  RR_RETURN_IF_ERROR(env_size("RR_GPU_SEGMENT_BYTES", Settings::kMinChunkBytes, Settings::kMaxChunkBytes,
                              &size_value, &found));
  if (found) s.gpu_segment_bytes = size_value, s.gpu_segment_bytes_source = Source::environment("RR_GPU_SEGMENT_BYTES");
  RR_RETURN_IF_ERROR(env_either("RR_GPU_REDUCE", "host", "device", &s.gpu_reduce_on_device, &s.gpu_reduce_source));
  bool by_rank = !s.ring_order_by_topology;
  RR_RETURN_IF_ERROR(env_either("RR_RING_ORDER", "topology", "rank", &by_rank, &s.ring_order_source));
  s.ring_order_by_topology = !by_rank;
  bool by_ucx = !s.same_host_shm;
  RR_RETURN_IF_ERROR(env_either("RR_SAME_HOST", "shm", "ucx", &by_ucx, &s.same_host_source));
  s.same_host_shm = !by_ucx;
  RR_RETURN_IF_ERROR(env_size("RR_SHM_SLOT_BYTES", Settings::kMinChunkBytes, Settings::kMaxChunkBytes, &size_value, &found));
  if (found) {
    if (size_value % 64 != 0) {
      return InvalidArgument("RR_SHM_SLOT_BYTES=" + std::to_string(size_value) + ": expected a multiple of 64");
    }
    s.shm_slot_bytes = size_value, s.shm_slot_bytes_source = Source::environment("RR_SHM_SLOT_BYTES");
  }
  RR_RETURN_IF_ERROR(env_int("RR_SHM_SLOTS", 2, Settings::kMaxShmSlots, &int_value, &found));
  if (found) s.shm_slots = static_cast<int>(int_value), s.shm_slots_source = Source::environment("RR_SHM_SLOTS");
  RR_RETURN_IF_ERROR(env_size("RR_SHM_BOARD_BYTES", 0, Settings::kMaxShmBoardBytes, &size_value, &found));
  if (found) {
    if (size_value % 64 != 0) {
      return InvalidArgument("RR_SHM_BOARD_BYTES=" + std::to_string(size_value) + ": expected a multiple of 64 (0: no board)");
    }
    s.shm_board_bytes = size_value, s.shm_board_bytes_source = Source::environment("RR_SHM_BOARD_BYTES");
  }
  if (const char* algo = env_str("RR_ALGO")) {
    if (!algo::parse_algo(algo, &s.allreduce_algo)) {
      return InvalidArgument(std::string("RR_ALGO=") + algo + ": expected auto, ring, rd (recursive doubling), hd (halving-doubling) or oneshot (shared-memory board)");
    }
    s.allreduce_algo_source = Source::environment("RR_ALGO");
  }
  exec::WaitMode wait_mode;  // process-wide: exec/ reads it, here a bad value is refused
  RR_RETURN_IF_ERROR(exec::read_wait_mode(&wait_mode));
  RR_RETURN_IF_ERROR(env_positive("RR_MODEL_ALPHA_US", 1e-6, &s.model.alpha_s, &s.model_source));
  RR_RETURN_IF_ERROR(env_positive("RR_MODEL_REMOTE_ALPHA_US", 1e-6, &s.model.remote_alpha_s, &s.model_source));
  RR_RETURN_IF_ERROR(env_positive("RR_MODEL_SLOT_ALPHA_US", 1e-6, &s.model.slot_alpha_s, &s.model_source));
  RR_RETURN_IF_ERROR(env_rate("RR_MODEL_MOVE_GBPS", &s.model.beta_s_per_byte, &s.model_source));
  RR_RETURN_IF_ERROR(env_rate("RR_MODEL_REDUCE_GBPS", &s.model.gamma_s_per_byte, &s.model_source));
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
