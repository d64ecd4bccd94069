#include "bootstrap/store_wire.hpp"

#include "bootstrap/encoding.hpp"

namespace rr::bootstrap::tcp_store {

ParseResult parse_request(const uint8_t* data, size_t size, uint32_t max_length, Request* request,
                          std::string* error) {
  // Each field is checked as soon as it has arrived, so a stranger's junk is
  // refused on its first bytes instead of being buffered up to the limit.
  if (size < kFrameHeaderBytes) return ParseResult::kIncomplete;
  const uint32_t length = get_u32(data);
  if (length < kRequestHeaderBytes) {
    *error = "request length " + std::to_string(length) + " is shorter than the " +
             std::to_string(kRequestHeaderBytes) + "-byte request header";
    return ParseResult::kMalformed;
  }
  if (length > max_length) {
    *error = "request length " + std::to_string(length) + " is above the limit of " +
             std::to_string(max_length) + " bytes";
    return ParseResult::kMalformed;
  }

  if (size < kFrameHeaderBytes + 1) return ParseResult::kIncomplete;
  const uint8_t opcode = data[kFrameHeaderBytes];
  if (opcode != static_cast<uint8_t>(Opcode::kSet) && opcode != static_cast<uint8_t>(Opcode::kGet) &&
      opcode != static_cast<uint8_t>(Opcode::kAdd) && opcode != static_cast<uint8_t>(Opcode::kHello)) {
    *error = "unknown opcode " + std::to_string(opcode);
    return ParseResult::kMalformed;
  }

  if (size < kFrameHeaderBytes + kRequestHeaderBytes) return ParseResult::kIncomplete;
  const uint32_t key_length = get_u32(data + kFrameHeaderBytes + 1);
  if (key_length > length - kRequestHeaderBytes) {
    *error = "key of " + std::to_string(key_length) + " bytes runs past the end of a " +
             std::to_string(length) + "-byte request";
    return ParseResult::kMalformed;
  }
  const size_t value_size = length - kRequestHeaderBytes - key_length;
  switch (static_cast<Opcode>(opcode)) {
    case Opcode::kSet:
      break;
    case Opcode::kGet:
      if (value_size != 0) {
        *error = "GET carries a value of " + std::to_string(value_size) + " bytes";
        return ParseResult::kMalformed;
      }
      break;
    case Opcode::kAdd:
      if (value_size != 8) {
        *error = "ADD carries " + std::to_string(value_size) + " bytes instead of an 8-byte delta";
        return ParseResult::kMalformed;
      }
      break;
    case Opcode::kHello:
      if (key_length != 0) {
        *error = "HELLO carries a key of " + std::to_string(key_length) + " bytes";
        return ParseResult::kMalformed;
      }
      if (value_size > kMaxSecretBytes) {
        *error = "HELLO carries a secret of " + std::to_string(value_size) + " bytes, above the limit of " +
                 std::to_string(kMaxSecretBytes);
        return ParseResult::kMalformed;
      }
      break;
  }

  if (size - kFrameHeaderBytes < length) return ParseResult::kIncomplete;
  const uint8_t* key = data + kFrameHeaderBytes + kRequestHeaderBytes;
  request->opcode = static_cast<Opcode>(opcode);
  request->key = std::string_view(reinterpret_cast<const char*>(key), key_length);
  request->value = key + key_length;
  request->value_size = value_size;
  request->frame_bytes = kFrameHeaderBytes + length;
  return ParseResult::kComplete;
}

std::vector<uint8_t> encode_request(Opcode opcode, std::string_view key, const uint8_t* value,
                                    size_t value_size) {
  const size_t length = kRequestHeaderBytes + key.size() + value_size;
  std::vector<uint8_t> frame;
  frame.reserve(kFrameHeaderBytes + length);
  append_u32(&frame, static_cast<uint32_t>(length));
  frame.push_back(static_cast<uint8_t>(opcode));
  append_u32(&frame, static_cast<uint32_t>(key.size()));
  frame.insert(frame.end(), key.begin(), key.end());
  if (value_size > 0) frame.insert(frame.end(), value, value + value_size);
  return frame;
}

void append_reply(std::vector<uint8_t>* out, ReplyStatus status, const uint8_t* payload,
                  size_t size) {
  append_u32(out, static_cast<uint32_t>(1 + size));
  out->push_back(static_cast<uint8_t>(status));
  if (size > 0) out->insert(out->end(), payload, payload + size);
}

bool secrets_equal(const uint8_t* expected, size_t expected_size, const uint8_t* given,
                   size_t given_size) {
  // volatile: the compiler may not turn the loop into an early-exit compare.
  volatile uint8_t difference = expected_size == given_size ? 0 : 1;
  for (size_t i = 0; i < expected_size; ++i) {
    const uint8_t other = i < given_size ? given[i] : static_cast<uint8_t>(~expected[i]);
    difference = static_cast<uint8_t>(difference | (expected[i] ^ other));
  }
  return difference == 0;
}

}  // namespace rr::bootstrap::tcp_store
