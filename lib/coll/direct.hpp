#pragma once
// The direct collectives (gather, scatter, all-to-all, all-to-all-v): one
// step each, every transfer posted at once. Each plan copies this rank's own
// block and fills `batch` (exec/batch.hpp, an Algorithm of one step) with
// the call's sends and receives, tagged with its sequence number, nearest
// peers on the ring first so that ranks do not all hit rank 0 at once;
// exec::drive then runs it. The argument check has already run (the
// communicator's agree(), and for all-to-all-v its count check).

#include <cstddef>

#include "exec/batch.hpp"
#include "exec/call.hpp"

namespace rr::coll {

// call.root's recv[r * count ...] = rank r's send.
void plan_gather(const exec::Call& call, int rank, int size, exec::Batch* batch);
// recv = call.root's send[rank * count ...].
void plan_scatter(const exec::Call& call, int rank, int size, exec::Batch* batch);
// recv[r * count ...] = rank r's send[rank * count ...].
void plan_all_to_all(const exec::Call& call, int rank, int size, exec::Batch* batch);
// recv[rdispls[p] ...] (recvcounts[p] elements) = rank p's send[its
// sdispls[rank] ...]. Every pair exchanges a message, empty ones too:
// without the count check (RR_CHECK_ARGUMENTS=0) the receiver still sees a
// count that disagrees, as a short or truncated message. This rank's own
// block is copied when its two counts agree (the caller checked).
void plan_all_to_all_v(const exec::Call& call, const size_t* sendcounts, const size_t* sdispls,
                       const size_t* recvcounts, const size_t* rdispls, int rank, int size, exec::Batch* batch);

}  // namespace rr::coll
