#pragma once
// The TCP store's wire format: request framing, the parser the server runs on
// every byte a client sends (pure, so it can be fuzzed: tests/fuzz/), and the
// encoders both sides use.
//
// All integers little-endian:
//
//   request := u32 length | u8 opcode | u32 key_length | key | value
//   reply   := u32 length | u8 status | payload
//
// `length` counts the bytes after the length field. A request longer than the
// limit in force (kMaxHelloBytes until the client has authenticated,
// kMaxMessageBytes after), shorter than its fixed header, with a key running
// past its end or with a value of the wrong shape for its opcode is malformed,
// and gets the client dropped.
//
//   HELLO key = empty, value = the secret    reply: kOk, or kUnauthorized then close
//   SET   value = the bytes to store         reply payload: empty
//   GET   value = empty                      reply payload: the stored bytes
//   ADD   value = i64 delta (8 bytes)        reply payload: i64 new value
//
// Every connection must open with a HELLO carrying the job's secret (empty for
// a loopback store started without one); anything else first is dropped, and
// a second HELLO later is malformed.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rr::bootstrap::tcp_store {

enum class Opcode : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kHello = 4 };
enum class ReplyStatus : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,  // e.g. ADD on a key that does not hold an integer
  kUnauthorized = 2,     // HELLO with the wrong secret; the server closes next
};

// Bounds what one member can make the server buffer.
constexpr uint32_t kMaxMessageBytes = 64u << 20;
// opcode + key_length
constexpr uint32_t kRequestHeaderBytes = 1 + 4;
// RR_AUTH_TOKEN is sent as it is, so this bounds it too.
constexpr size_t kMaxSecretBytes = 256;
// The only message a stranger may send, so all a stranger can make the server
// buffer: a HELLO with the longest secret.
constexpr uint32_t kMaxHelloBytes = kRequestHeaderBytes + kMaxSecretBytes;
// The length field, then the body.
constexpr size_t kFrameHeaderBytes = 4;

// One request, pointing into the bytes it was parsed from.
struct Request {
  Opcode opcode = Opcode::kSet;
  std::string_view key;
  const uint8_t* value = nullptr;
  size_t value_size = 0;
  size_t frame_bytes = 0;  // what the request takes in the stream, length field included
};

enum class ParseResult {
  kComplete,    // *request is the first request of the input
  kIncomplete,  // the input is the start of a request that may still be valid: read more
  kMalformed,   // *error says why; no bytes that follow can make it valid
};

// Parses the request at the start of data[0, size), allowing a body of at most
// `max_length` bytes. Reports kMalformed as early as the bytes allow (a length
// or opcode out of range before the rest arrives). Touches nothing but its
// arguments.
ParseResult parse_request(const uint8_t* data, size_t size, uint32_t max_length, Request* request,
                          std::string* error);

// The frame of one request; the caller has checked the size against the limit.
std::vector<uint8_t> encode_request(Opcode opcode, std::string_view key, const uint8_t* value,
                                    size_t value_size);

// Appends the frame of one reply.
void append_reply(std::vector<uint8_t>* out, ReplyStatus status, const uint8_t* payload,
                  size_t size);

// Whether `given` equals `expected`, in a time that depends on their lengths
// only, not on where they first differ: the HELLO check must not tell a
// stranger how much of a guess was right.
bool secrets_equal(const uint8_t* expected, size_t expected_size, const uint8_t* given,
                   size_t given_size);

}  // namespace rr::bootstrap::tcp_store
