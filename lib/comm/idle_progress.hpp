#pragma once
// Keeps the transports of idle communicators moving, so that a call that
// returned success has delivered its bytes whatever the caller does next.
//
// A send is done once its buffer is free, which on some lanes comes before
// all of its bytes have left the process: UCX's TCP lane copies a send below
// its zero-copy threshold, reports it done, and writes what the socket did
// not take at a later progress of that communicator's worker (each
// communicator has its own). A caller whose next step does not progress
// that communicator (a call on another one, computing, sleeping in Python)
// left the peer waiting for those bytes; a peer that needed this rank on the
// other communicator then waited for ever. Flushing each endpoint at the
// end of every call does not help there: on TCP a flush completes only when
// the peer acknowledges it, which takes the peer's progress, and the peer
// may have moved on the same way.
//
// So, as Gloo's device thread and NCCL's proxy thread do, one thread per
// process progresses every communicator no call is using: it takes a
// communicator's turn only while nothing runs, waits or is queued on it
// (OperationQueue::run_if_idle), progresses its transport until it runs dry,
// arms its event descriptor and gives the turn back (microseconds); then it
// sleeps on the descriptors until one of them has something (a socket that
// takes more, a message, a peer's acknowledgment), or kPeriodMs at most. A
// communicator that failed or is aborting is left alone (its transport is
// never progressed again: comm/communicator.cpp, ~Communicator).

namespace rr {

class Communicator;

namespace idle_progress {

// How long the thread sleeps at most between two looks at a communicator
// (one that a call was using, or whose transport cannot wake it).
constexpr int kPeriodMs = 10;

// From the end of a communicator's setup (Communicator::greet_neighbours),
// once its connections are made. Starts the thread on first use.
void add(Communicator* comm);
// Before the communicator goes (~Communicator): returns once the thread is
// no longer inside it, and never enters it again.
void remove(Communicator* comm);

}  // namespace idle_progress
}  // namespace rr
