#pragma once
// Every RR_* variable the engine reads, in one table: its name, the
// rrConfig_t field that may set it too, where it is read, its default as
// the documents print it, a one-line summary, and, for the settings of a
// communicator, how it is parsed from the environment into Settings, shown
// and sourced. resolve_settings() parses by walking it, rr-info prints its
// rows from it (with the default and the summary in --json), and the docs
// test checks both settings tables' variables and defaults against it.
// The Settings field's comment says why the default is what it is.
//
// A new setting: its Settings field (comm/settings.hpp), a row here, and a
// row in README.md's and docs/settings.md's tables (the docs test says
// which are missing or disagree).

#include <vector>
#include <string>

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
};

// In the order rr-info prints them.
const std::vector<SettingSpec>& setting_specs();

}  // namespace rr
