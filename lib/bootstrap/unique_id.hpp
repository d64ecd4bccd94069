#pragma once
// The layout of a unique id inside rrUniqueId: where the rendezvous serves,
// and the secret a rank must show it. Tests read it to forge ids.

#include <cstdint>

#include "ringreduce/ringreduce.h"

namespace rr::bootstrap {

constexpr char kUniqueIdMagic[4] = {'R', 'R', 'I', 'D'};
// From getrandom(2): guessing it is hopeless, and it fits a HELLO.
constexpr int kUniqueIdSecretBytes = 32;

struct UniqueIdWire {
  char magic[4];  // kUniqueIdMagic
  uint16_t port;  // host byte order: ids do not cross architectures
  char host[64];  // NUL-terminated
  uint8_t secret[kUniqueIdSecretBytes];
};
static_assert(sizeof(UniqueIdWire) <= RR_UNIQUE_ID_BYTES, "unique id layout must fit");

}  // namespace rr::bootstrap
