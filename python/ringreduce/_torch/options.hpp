#pragma once
// ProcessGroupRingreduce.Options: what init_process_group(pg_options=...) and
// new_group(pg_options=...) hand the backend (torch's extended backend API),
// and what getBackendOptions() gives split_group for the child. The engine's
// per-communicator settings (rrConfig_t); a field left unset takes the RR_*
// environment variable, or else the engine's default, as the C API's
// RR_CONFIG_INITIALIZER does. The timeout is always the group's (torch's
// `timeout` argument).

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>

#include <ringreduce/ringreduce.h>

namespace ringreduce_torch {

// A timeout as the engine takes it: milliseconds, at least 1.
inline int config_timeout_ms(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
}

struct RingreduceOptions : c10d::Backend::Options {
  explicit RingreduceOptions(std::chrono::milliseconds timeout = kBackendDefaultTimeout)
      : c10d::Backend::Options("ringreduce", timeout) {}

  c10::intrusive_ptr<c10d::Backend::Options> clone() const override {
    return c10::make_intrusive<RingreduceOptions>(*this);
  }

  // The engine's settings: 0 / -1 leave each to RR_CHUNK_BYTES,
  // RR_PIPELINE_DEPTH, RR_CHECK_ARGUMENTS, RR_DEBUG or the default.
  size_t chunk_bytes = 0;
  int pipeline_depth = RR_CONFIG_UNDEF_INT;
  int check_arguments = RR_CONFIG_UNDEF_INT;
  int debug_level = RR_CONFIG_UNDEF_INT;

  // The engine's config for a communicator of these options; the engine
  // checks each field and names the one out of range.
  rrConfig_t config() const {
    rrConfig_t c = RR_CONFIG_INITIALIZER;
    c.chunk_bytes = chunk_bytes;
    c.pipeline_depth = pipeline_depth;
    c.check_arguments = check_arguments;
    c.debug_level = debug_level;
    c.timeout_ms = config_timeout_ms(timeout);
    return c;
  }
};

}  // namespace ringreduce_torch
