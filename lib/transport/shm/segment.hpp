#pragma once
// Memory shared by processes of one host, as the same-host path uses it
// (slot_ring.hpp, board.hpp): an anonymous memfd that one process makes and
// the others copy out of it with pidfd_getfd (Linux 5.6; the permission UCX's
// CMA needs: a process of the same user), so nothing is ever left in
// /dev/shm whatever kills the processes; and futex waits on 32-bit words in
// it, for a side that waits long.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/status.hpp"

namespace rr::transport::shm {

// A new zero-filled segment of `bytes`; *fd is its descriptor. `what` starts
// each error ("shared-memory ring").
[[nodiscard]] Status create_segment(const char* what, const char* name, size_t bytes, int* fd);
// Copies descriptor `fd` of process `pid` into this one as *local.
[[nodiscard]] Status copy_descriptor(const char* what, int pid, int fd, int* local);
// Maps all of segment `fd`, which must hold exactly `bytes`.
[[nodiscard]] Status map_segment(const char* what, int fd, size_t bytes, void** mapping);

// Asks that the `bytes` at `address` (a mapping of a segment, page-aligned)
// live on NUMA node `node`: a preferred policy on the segment itself (so it
// holds for whichever process touches a page first; another node when that
// one is full), then touches every page so that they are placed now, before
// any peer uses them. Call it on a segment no peer writes yet. `node` < 0,
// or a kernel without NUMA support: nothing. `what` starts each error.
[[nodiscard]] Status place_pages(const char* what, void* address, size_t bytes, int node);
// The NUMA node the page at `address` lives on, -1 when the kernel cannot
// say (no NUMA support) or the page is not there yet.
int node_of_page(const void* address);
// Whether the pages at `address` have a preferred-node policy (place_pages
// set one), and *node that node.
bool preferred_node(const void* address, int* node);
// Wakes every process sleeping on `word`.
void futex_wake_all(std::atomic<uint32_t>* word);
// Sleeps while `word` holds `seen`, at most `timeout_ms`; spurious returns happen.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms);

}  // namespace rr::transport::shm
