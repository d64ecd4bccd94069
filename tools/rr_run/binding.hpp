#pragma once
// Where rr-run's ranks run: by default wherever the kernel puts them, each
// with every CPU rr-run may use (as torchrun leaves them: a torch rank's
// intra-op threads need them); with --bind-to core, rank r on the
// (r mod CPUs)-th of those CPUs alone, as mpirun --bind-to core, so that
// neighbouring ranks (the ring's, in rank order) run on different CPUs,
// each CPU carries the same number of ranks give or take one, none
// migrates, and each rank's NUMA node is known (the engine then places the
// same-host shared memory there).

#include <string>
#include <vector>

namespace rr::run {

enum class BindTo {
  kNone,  // the default
  kCore,  // one CPU per rank, round robin
};

// The CPUs this process may run on (sched_getaffinity), in increasing
// order; empty with *error saying why when the kernel does not tell.
std::vector<int> allowed_cpus(std::string* error);

// The CPU each of `nranks` local ranks is bound to, by local rank, or -1 for
// none, given the CPUs rr-run may use.
std::vector<int> plan_binding(BindTo how, int nranks, const std::vector<int>& cpus);

}  // namespace rr::run
