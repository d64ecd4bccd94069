#pragma once
// Reading RR_* settings from the environment, with errors that name the variable.

#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace rr {

// Absent or empty: *found = false and *value untouched.
Status env_int(const char* name, int64_t min, int64_t max, int64_t* value, bool* found);
// A size in bytes with an optional K, M or G suffix (powers of two, either
// case, then an optional B): "512K", "4M", "32768K". False on anything else,
// a sign, or more than 2^64 - 1 bytes.
bool parse_size(const char* text, uint64_t* value);
// Sizes accept K, M, G suffixes (powers of two): "512K", "4M".
Status env_size(const char* name, uint64_t min, uint64_t max, uint64_t* value, bool* found);
// nullptr when unset or empty.
const char* env_str(const char* name);

}  // namespace rr
