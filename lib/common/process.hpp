#pragma once
// Whether another process still runs.

namespace rr {

// True once process `pid` has ended: gone, or a zombie not yet reaped.
// False while it runs, and for a pid that is not a process's (<= 0).
bool process_ended(int pid);

}  // namespace rr
