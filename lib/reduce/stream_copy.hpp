#pragma once
// A copy into memory that will not be read again soon: non-temporal stores
// (x86-64's SSE2 movntdq, every x86-64 CPU has it), which write whole lines
// without reading them first and without evicting what the caches hold. A
// plain copy into a cold buffer reads each destination line before writing
// it (a read for ownership): a third more memory traffic. For a large
// output written once (the slot rings' allreduce out of place, above
// RR_SHM_STREAM_BYTES); a small one is better left in the caches for its
// reader. Elsewhere than x86-64, memcpy.

#include <cstddef>

namespace rr::reduce {

// Copies `bytes` from `src` to `dst` (not overlapping); the stores are
// ordered (sfence) before it returns, so that whatever follows, a release
// to another thread included, comes after them.
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace rr::reduce
