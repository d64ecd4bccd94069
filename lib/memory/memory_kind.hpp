#pragma once
// Where a buffer lives, asked of CUDA (cudaPointerGetAttributes) in the CUDA
// build; without it every buffer is host memory. Device and managed memory
// are staged through pinned host memory (comm/staged_collectives.hpp);
// registered (pinned) host memory is host memory to the collectives.

#include "common/status.hpp"

namespace rr::memory {

enum class MemoryKind { kHost, kRegisteredHost, kDevice, kManaged };

struct Placement {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the GPU of device and managed memory
  // Whether a collective must stage it (a host thread cannot use it directly).
  bool on_device() const { return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged; }
};

// Classifies `ptr`; `name` ("sendbuff") is for the error, a CUDA failure
// other than "there is no GPU" (which means host memory).
Status classify(const void* ptr, const char* name, Placement* out);

const char* kind_name(MemoryKind kind);

}  // namespace rr::memory
