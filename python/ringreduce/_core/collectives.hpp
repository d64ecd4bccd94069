#pragma once
// The collectives as ringreduce.Comm's methods (allreduce, reduce_scatter,
// allgather, broadcast, reduce, gather, scatter, alltoall, alltoallv,
// barrier), each with its non-blocking i- form.

#include "comm.hpp"

namespace ringreduce_core {

// Adds the collective methods to `comm`.
void bind_collectives(CommClass& comm);

}  // namespace ringreduce_core
