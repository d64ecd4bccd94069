#pragma once
// How the stores encode numbers: fixed-width little-endian integers in the
// TCP wire protocol and the file store's records (independent of the host's
// byte order), and counters as decimal text, so that get() on a counter key
// returns "800" as torch.distributed's stores do.

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/status.hpp"

namespace rr::bootstrap {

inline void put_u32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

inline void append_u32(std::vector<uint8_t>* out, uint32_t v) {
  uint8_t bytes[4];
  put_u32(bytes, v);
  out->insert(out->end(), bytes, bytes + 4);
}

inline uint32_t get_u32(const uint8_t* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(in[i]) << (8 * i);
  return v;
}

inline void put_i64(uint8_t* out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(u >> (8 * i));
}

inline int64_t get_i64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return static_cast<int64_t>(v);
}

// A key for messages: quoted, and cut short, since a key may be megabytes long.
inline std::string quote_key(const std::string& key) {
  constexpr size_t kShown = 128;
  if (key.size() <= kShown) return "'" + key + "'";
  return "'" + key.substr(0, kShown) + "...' (" + std::to_string(key.size()) + " bytes)";
}

inline Bytes counter_text(int64_t value) {
  const std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

// The counter `key` after adding `delta` to its stored text `current`
// (null: absent, counts as 0). kInvalidArgument when the stored value is not a
// decimal int64 or the sum overflows.
[[nodiscard]] inline Status add_to_counter(const std::string& key, const Bytes* current,
                                           int64_t delta, int64_t* result) {
  int64_t value = 0;
  if (current != nullptr) {
    const char* begin = reinterpret_cast<const char*>(current->data());
    const char* end = begin + current->size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (current->empty() || ec != std::errc() || ptr != end) {
      return InvalidArgument("key " + quote_key(key) + " does not hold an integer counter");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return InvalidArgument("counter " + quote_key(key) + " overflows int64 (" +
                           std::to_string(value) + " + " + std::to_string(delta) + ")");
  }
  *result = sum;
  return Status::Ok();
}

}  // namespace rr::bootstrap
