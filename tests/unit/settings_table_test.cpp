// The engine's settings table (lib/comm/settings_table.hpp) against the
// code it stands for: each variable's documented default, set explicitly,
// gives the value the engine has unset (so the documents, which the docs
// test holds to the table, say what the code does); a value that is no
// value is refused naming the variable; every row of a communicator
// setting can be parsed, shown and sourced, and no variable is listed twice;
// every rrConfig_t field is read through its row: set, it wins over the
// default with the source "config"; out of range, it is refused naming
// config.<field>; past a caller's smaller struct's size, it is not read.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "comm/settings.hpp"
#include "comm/settings_table.hpp"

namespace rr {
namespace {

// Equal, or numbers within 1% (a rate shown rounded: "6.67" against 6.66667).
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a);
  const double y = std::strtod(b.c_str(), &end_b);
  return *end_a == '\0' && *end_b == '\0' && !a.empty() && !b.empty() && std::fabs(x - y) <= 0.01 * std::fabs(y);
}

class SettingsTable : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const SettingSpec& spec : setting_specs()) unsetenv(spec.variable);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(SettingsTable, EveryVariableOnceAndEveryCommunicatorSettingWhole) {
  std::set<std::string> seen;
  for (const SettingSpec& spec : setting_specs()) {
    EXPECT_TRUE(seen.insert(spec.variable).second) << spec.variable << " is listed twice";
    EXPECT_EQ(std::string(spec.variable).rfind("RR_", 0), 0u) << spec.variable;
    EXPECT_NE(std::string(spec.default_text), "") << spec.variable;
    EXPECT_NE(std::string(spec.summary), "") << spec.variable;
    const bool communicator = spec.scope == SettingSpec::Scope::kCommunicator;
    EXPECT_EQ(spec.from_env != nullptr, communicator) << spec.variable;
    EXPECT_EQ(spec.value != nullptr, communicator) << spec.variable;
    EXPECT_EQ(spec.source != nullptr, communicator) << spec.variable;
  }
}

TEST_F(SettingsTable, TheDocumentedDefaultSetExplicitlyIsTheDefault) {
  Settings unset;
  ASSERT_TRUE(resolve_settings(nullptr, &unset).ok());
  int checked = 0;
  for (const SettingSpec& spec : setting_specs()) {
    if (!spec.from_env) continue;
    const std::string text = spec.default_text;
    // A default said in words ("the NIC's speed", "auto (≥ 4)") is no value to set.
    if (text.find(' ') != std::string::npos) continue;
    setenv(spec.variable, text.c_str(), 1);
    Settings set;
    const Status resolved = resolve_settings(nullptr, &set);
    // (The cost model's rows read their source from the environment.)
    const std::string source_set = spec.source(spec, set).text();
    unsetenv(spec.variable);
    ASSERT_TRUE(resolved.ok()) << spec.variable << "=" << text << ": " << resolved.message();
    EXPECT_TRUE(same_value(spec.value(set), spec.value(unset)))
        << spec.variable << ": the table's default " << text << " gives " << spec.value(set) << ", unset it is "
        << spec.value(unset);
    EXPECT_EQ(source_set, std::string("env ") + spec.variable);
    EXPECT_EQ(spec.source(spec, unset).text(), "default") << spec.variable;
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

TEST_F(SettingsTable, ANonsenseValueIsRefusedNamingTheVariable) {
  for (const SettingSpec& spec : setting_specs()) {
    if (!spec.from_env) continue;
    setenv(spec.variable, "not-a-value!", 1);
    Settings s;
    const Status resolved = resolve_settings(nullptr, &s);
    unsetenv(spec.variable);
    EXPECT_EQ(resolved.code(), Code::kInvalidArgument) << spec.variable;
    EXPECT_NE(resolved.message().find(spec.variable), std::string::npos) << resolved.message();
  }
}

TEST_F(SettingsTable, EveryConfigFieldIsReadThroughItsRow) {
  // A value each field takes, as rr-info's --config would set it.
  const std::pair<const char*, int64_t> given[] = {{"chunk_bytes", 65536},   {"pipeline_depth", 3},
                                                   {"timeout_ms", 1234},     {"check_arguments", 0},
                                                   {"gpu_segment_bytes", 131072}};
  int checked = 0;
  for (const SettingSpec& spec : setting_specs()) {
    EXPECT_EQ(spec.config_field != nullptr, spec.from_config != nullptr) << spec.variable;
    if (!spec.to_config) continue;
    ASSERT_NE(spec.config_field, nullptr) << spec.variable;
    int64_t value = -1;
    for (const auto& [field, v] : given) {
      if (std::string(field) == spec.config_field) value = v;
    }
    ASSERT_GE(value, 0) << "no value given for config." << spec.config_field;
    rrConfig_t config = RR_CONFIG_INITIALIZER;
    spec.to_config(&config, value);
    Settings s;
    ASSERT_TRUE(resolve_settings(&config, &s).ok()) << spec.config_field;
    EXPECT_EQ(spec.value(s), std::to_string(value)) << spec.config_field;
    EXPECT_EQ(spec.source(spec, s).text(), "config") << spec.config_field;
    // Out of range: refused naming the field.
    rrConfig_t bad = RR_CONFIG_INITIALIZER;
    spec.to_config(&bad, 3);  // 3 bytes, a depth of 3 (fine), 3 ms (fine), 3 for a flag
    const Status refused = resolve_settings(&bad, &s);
    const std::string field = spec.config_field;
    if (field == "chunk_bytes" || field == "gpu_segment_bytes" || field == "check_arguments") {
      EXPECT_EQ(refused.code(), Code::kInvalidArgument) << field;
      EXPECT_NE(refused.message().find("config." + field + "=3"), std::string::npos) << refused.message();
    } else {
      EXPECT_TRUE(refused.ok()) << field << ": " << refused.message();
    }
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST_F(SettingsTable, AFieldPastAnOlderStructsSizeIsNotRead) {
  rrConfig_t config = RR_CONFIG_INITIALIZER;
  config.gpu_segment_bytes = 3;  // out of range: refused if it were read
  config.size = offsetof(rrConfig_t, gpu_segment_bytes);
  config.timeout_ms = 4321;
  Settings s;
  ASSERT_TRUE(resolve_settings(&config, &s).ok());
  EXPECT_EQ(s.timeout_ms, 4321);
  config.size = sizeof(rrConfig_t);
  EXPECT_EQ(resolve_settings(&config, &s).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rr
