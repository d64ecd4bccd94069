// libFuzzer target: the two messages ranks exchange about operations
// (lib/exec/wire.hpp), the operation header and the notice, as a peer's
// bytes arrive. Checks, beyond "no crash, no UB":
//   - a header that decodes encodes back to exactly its bytes, and its
//     description (which goes into error text) can be built;
//   - a notice that decodes re-encodes to the same length, kind, sequence and
//     origin, and its text is printable.
// Run by tests/fuzz/run_fuzz.sh; seeds in corpus/op_wire/.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "exec/wire.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rr::wire::OpHeader header;
  if (rr::wire::decode_header(data, size, &header).ok()) {
    uint8_t again[rr::wire::kOpHeaderBytes];
    rr::wire::encode_header(header, again);
    check(std::memcmp(again, data, sizeof(again)) == 0);
    check(!header.describe().empty());
  }
  rr::wire::Notice notice;
  if (rr::wire::decode_notice(data, size, &notice).ok()) {
    for (char c : notice.text) check(c >= 0x20 && c < 0x7f);
    uint8_t again[rr::wire::kMaxNoticeBytes];
    const size_t n = rr::wire::encode_notice(notice, again);
    check(n == size);
    rr::wire::Notice back;
    check(rr::wire::decode_notice(again, n, &back).ok());
    check(back.kind == notice.kind && back.sequence == notice.sequence && back.origin == notice.origin &&
          back.text == notice.text);
  }
  return 0;
}
