#include "common/env.hpp"

#include <cerrno>
#include <cstdlib>

namespace rr {

const char* env_str(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

Status env_int(const char* name, int64_t min, int64_t max, int64_t* value, bool* found) {
  *found = false;
  const char* text = env_str(name);
  if (!text) return Status::Ok();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    return InvalidArgument(std::string(name) + "='" + text + "': expected an integer in [" +
                           std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  *value = v;
  *found = true;
  return Status::Ok();
}

bool parse_size(const char* text, uint64_t* value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  uint64_t scale = 1;
  if (end && (*end == 'K' || *end == 'k')) scale = uint64_t{1} << 10, ++end;
  else if (end && (*end == 'M' || *end == 'm')) scale = uint64_t{1} << 20, ++end;
  else if (end && (*end == 'G' || *end == 'g')) scale = uint64_t{1} << 30, ++end;
  if (end && (*end == 'B' || *end == 'b')) ++end;
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v > UINT64_MAX / scale) return false;
  *value = v * scale;
  return true;
}

Status env_size(const char* name, uint64_t min, uint64_t max, uint64_t* value, bool* found) {
  *found = false;
  const char* text = env_str(name);
  if (!text) return Status::Ok();
  uint64_t v = 0;
  if (!parse_size(text, &v) || v < min || v > max) {
    return InvalidArgument(std::string(name) + "='" + text + "': expected a size in [" + std::to_string(min) +
                           ", " + std::to_string(max) + "] bytes (suffixes K, M, G)");
  }
  *value = v;
  *found = true;
  return Status::Ok();
}

}  // namespace rr
