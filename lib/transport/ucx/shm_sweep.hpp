#pragma once
// UCX's POSIX shared-memory segments (/dev/shm/ucx_shm_posix_*) are unlinked
// as soon as their creator has opened them (peers attach through
// /proc/<pid>/fd), and its System V ones are marked for removal once
// attached, but a rank killed in between leaves its segment behind. Nobody
// else can ever attach to it, so once no process holds it it is garbage:
// the survivors remove it when they learn of the loss (a peer's death, a
// failed setup) and again when they close after one.

namespace rr::transport {

// Removes every /dev/shm/ucx_shm_posix_* owned by this user that no process
// has open or mapped (when some process of this user cannot be inspected,
// none), and every IPC_PRIVATE System V segment of this user that nobody
// has attached, not marked for removal, whose creator has ended. Returns
// how many it removed.
int remove_orphan_ucx_segments();

}  // namespace rr::transport
