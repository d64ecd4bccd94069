#pragma once
// UCX's own log, filtered. A few lines UCX prints as ERROR or WARN are the
// expected echo of a loss the engine has already reported: attaching to the
// shared memory of a peer that is leaving fails (mm_sysv's shmat, mm_posix's
// open), and a worker closed after a failure still holds unmatched messages
// and requests (tag_match, mpool). While some transport in this process has
// seen a peer leave or its communicator fail, those lines, and only those,
// go to RR_DEBUG=INFO instead of stderr; every other line passes as UCX
// wrote it, and none is filtered in a process where nothing failed.

namespace rr::transport::ucx_log {

// Installs the filter ahead of UCX's printer; once per process, idempotent.
void install();

// A transport has seen a loss (+1), or has closed after one (-1).
void count_loss(int delta);

}  // namespace rr::transport::ucx_log
