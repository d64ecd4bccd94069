#pragma once
// Every RR_* variable the engine reads, in one table: its name, the
// rrConfig_t field that may set it too, where it is read, its default as
// the documents print it, a one-line summary, and, for the settings of a
// communicator, how it is parsed from the environment into Settings, shown
// and sourced, and how its rrConfig_t field is read. resolve_settings()
// parses the environment and a caller's config by walking it, rr-info prints
// its rows and takes --config fields from it (with the default and the
// summary in --json), and the docs
// test checks both settings tables' variables and defaults against it.
// The Settings field's comment says why the default is what it is.
//
// A new setting: its Settings field (comm/settings.hpp), a row here, and a
// row in README.md's and docs/settings.md's tables (the docs test says
// which are missing or disagree).

#include <cstdint>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

#include "comm/settings.hpp"
#include "common/status.hpp"

namespace rr {

struct SettingSpec {
  enum class Scope {
    kCommunicator,  // resolved per communicator into Settings (comm/settings.cpp)
    kProcess,       // read once per process where it is used (the log, the wait policy)
    kBootstrap,     // read by each rendezvous (bootstrap/)
    kCuda,          // read when a communicator's CUDA copy engine is made (CUDA build)
  };
  const char* variable;      // "RR_CHUNK_BYTES"
  const char* config_field;  // "chunk_bytes", or null: environment only
  Scope scope;
  const char* default_text;  // as both settings tables print it: "512K"
  const char* summary;       // README.md's "what"

  // kCommunicator only (null otherwise). Reads the variable from the
  // environment into *s (untouched when unset), or refuses it naming the
  // variable and what it takes.
  Status (*from_env)(const SettingSpec& spec, Settings* s) = nullptr;
  // Its value in `s`, as rr-info prints it, and where it came from.
  std::string (*value)(const Settings& s) = nullptr;
  Source (*source)(const SettingSpec& spec, const Settings& s) = nullptr;

  // Rows with a config field. Reads it from `config` into *s (a field past
  // config.size, in a caller's older and smaller struct, is unset, as is one
  // at its RR_CONFIG_INITIALIZER value), or refuses it naming
  // config.<field> and what it takes.
  Status (*from_config)(const SettingSpec& spec, const rrConfig_t& config, Settings* s) = nullptr;
  // Sets the field in *config, for the fields a communicator takes (rr-info's
  // --config FIELD=VALUE); null for debug_level, whose log level is the
  // process's.
  void (*to_config)(rrConfig_t* config, int64_t value) = nullptr;
};

// In the order rr-info prints them.
const std::vector<SettingSpec>& setting_specs();

}  // namespace rr
