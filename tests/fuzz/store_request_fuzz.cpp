// libFuzzer target: the TCP store's request parser, fed a client's byte
// stream as the server sees it. Checks, beyond "no crash, no UB":
//   - a complete request lies inside the input and encodes back to exactly
//     the bytes it was parsed from;
//   - a malformed one says why;
//   - the stranger limit never lets through more of a stream than the member
//     limit does (the limits nest).
// Run by tests/fuzz/run_fuzz.sh; seeds in corpus/store_request/.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/store_wire.hpp"

namespace {

using rr::bootstrap::tcp_store::encode_request;
using rr::bootstrap::tcp_store::kMaxHelloBytes;
using rr::bootstrap::tcp_store::kMaxMessageBytes;
using rr::bootstrap::tcp_store::parse_request;
using rr::bootstrap::tcp_store::ParseResult;
using rr::bootstrap::tcp_store::Request;

void check(bool ok) {
  if (!ok) std::abort();
}

// Parses requests one after another, as serve() does, under `limit`; returns
// how many were complete.
size_t parse_stream(const uint8_t* data, size_t size, uint32_t limit) {
  size_t offset = 0;
  size_t complete = 0;
  while (offset < size) {
    Request request;
    std::string error;
    const ParseResult result = parse_request(data + offset, size - offset, limit, &request, &error);
    if (result == ParseResult::kMalformed) {
      check(!error.empty());
      break;
    }
    if (result == ParseResult::kIncomplete) break;
    const uint8_t* frame = data + offset;
    check(request.frame_bytes >= 4 + 5 && request.frame_bytes <= size - offset);
    check(request.frame_bytes - 4 <= limit);
    const auto* key = reinterpret_cast<const uint8_t*>(request.key.data());
    check(key >= frame + 9 && key + request.key.size() == request.value);
    check(request.value + request.value_size == frame + request.frame_bytes);
    const std::vector<uint8_t> again =
        encode_request(request.opcode, request.key, request.value, request.value_size);
    check(again.size() == request.frame_bytes && std::memcmp(again.data(), frame, again.size()) == 0);
    offset += request.frame_bytes;
    ++complete;
  }
  return complete;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t as_member = parse_stream(data, size, kMaxMessageBytes);
  const size_t as_stranger = parse_stream(data, size, kMaxHelloBytes);
  check(as_stranger <= as_member);
  return 0;
}
