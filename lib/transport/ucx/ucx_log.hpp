#pragma once
// UCX's own log, filtered. A few lines UCX prints as ERROR or WARN are the
// expected echo of a peer that left: attaching to the shared memory of a
// peer that released it fails (mm_sysv's shmat with EINVAL, mm_posix's open
// with ENOENT: that errno means exactly this; connecting to a peer on
// another host is refused once its worker is gone), and a worker closed after a
// failure still holds unmatched messages and requests (tag_match, mpool:
// filtered only while some transport in this process has seen a peer leave
// or its communicator fail). Those lines, and only those, go to
// RR_DEBUG=INFO instead of UCX's output; every other line passes as UCX
// wrote it. A loss that matters to a call is still named by the engine's
// own error.

#include <string>

namespace rr::transport::ucx_log {

// Installs the filter ahead of UCX's printer; once per process, idempotent.
void install();

// A transport has seen a loss (+1), or has closed after one (-1).
void count_loss(int delta);

// Records the first ERROR line UCX prints on this thread while it lives (one
// the filter lets through). UCX's status alone often hides the cause ("No
// resources are available to initiate the operation" for a full /dev/shm);
// its line names it.
class FirstError {
 public:
  FirstError();
  ~FirstError();
  FirstError(const FirstError&) = delete;
  FirstError& operator=(const FirstError&) = delete;

  // "mm_posix.c: Not enough memory to write total of 4292720 bytes. ...", or empty.
  const std::string& text() const { return text_; }

 private:
  friend struct Recorder;
  FirstError* outer_;
  std::string text_;
};

}  // namespace rr::transport::ucx_log
