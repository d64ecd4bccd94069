// The physical reference for shared-memory runs: what one core copies per
// second between buffers far larger than any cache. A ring rank on shared
// memory moves its bytes with copies like this, so busbw / memcpy says how
// much of the machine a backend uses.
#pragma once

namespace rrbench {

// Bytes copied per second / 1e9, best of 5 copies of 256 MiB.
double measure_memcpy_gbps();

}  // namespace rrbench
