#pragma once
// UCX's POSIX shared-memory segments (/dev/shm/ucx_shm_posix_*) are unlinked
// as soon as their creator has opened them (peers attach through
// /proc/<pid>/fd), but a rank killed between the two leaves its segment
// behind. Nobody else can ever attach to it, so once no process holds it
// open or mapped it is garbage: the survivors remove it when they learn of
// the loss and again when they close.

namespace rr::transport {

// Removes every /dev/shm/ucx_shm_posix_* owned by this user that no process
// has open or mapped. Returns how many it removed. When some process of
// this user cannot be inspected, nothing is removed.
int remove_orphan_ucx_segments();

}  // namespace rr::transport
