#pragma once
// A result every rank holds alike (allreduce's, all-gather's), checked once
// per job instead of once per rank, without trusting the library under test.
//
// Checking an allreduce of `count` elements against the double-precision
// reference costs each rank `ranks x count` input evaluations, so a job of N
// ranks sharing 2 cores spends N^2 x count on checks that are the same on
// every rank. Here rank r checks slice r of its result (count / N elements)
// against the reference, hashes every slice of its own result, and leaves
// {its verdict on slice r, the N hashes} in a file of the job's folder in
// /tmp. Slice s of rank r's result then counts as checked when rank s
// passed slice s and rank r's slice s hashes as rank s's does; otherwise
// (another verdict, another hash, a record missing after the wait, a folder
// that cannot be made) rank r checks slice s against the reference itself,
// with the same messages as before. So every element of every rank's result
// is checked, by its rank or by a 64-bit hash's equality with bytes another
// rank checked; nothing passes on another rank's word about bytes it did
// not see. The exchange is files, not a collective of the library.
//
// The job's folder is named by RR_AUTH_TOKEN (rr-run and
// tests/integration/fake_hosts.sh give every job a fresh one unless the
// caller set one) and MASTER_PORT; without a token, or on one rank, every
// rank checks everything, as before. A folder an earlier job left (killed
// before its end(); the same token and port) is harmless: a record vouches
// only for bytes equal to ones its rank checked against the same call.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace shared_check {

// Called once a job's ranks know their rank and size (the test environment's
// SetUp); `end` in its TearDown removes the folder once every rank is done.
void begin(int rank, int size);
void end();

// Checks `out` (`count` elements of `elem` bytes, the same on every rank when
// the library is right): `check(first, n)` checks elements [first, first + n)
// against the reference, reports what is wrong (ADD_FAILURE) and returns
// whether all were right. `what` names the call (type, op, count, seed, ...):
// every rank passes the same for the same call. Small results are checked
// whole by every rank: the exchange would cost more than the reference.
void check_replicated(const void* out, size_t count, size_t elem, const std::string& what,
                      const std::function<bool(size_t first, size_t n)>& check);

}  // namespace shared_check
