#pragma once
// Recognises the launcher that started this process and what it says about
// rank, world size and job: torchrun (RANK, WORLD_SIZE, LOCAL_RANK), OpenMPI's
// mpirun (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID),
// and Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID).

#include <string>

#include "common/status.hpp"

namespace rr::bootstrap {

struct LaunchInfo {
  std::string launcher;     // "torchrun/env", "OpenMPI", "MPICH/PMI", "Slurm"
  int rank = -1;
  int size = -1;
  int local_rank = -1;
  int local_size = -1;      // ranks on this host, when the launcher says
  bool single_host = false; // every rank on this host
  std::string job_id;       // unique to this job step, when the launcher has one
};

// The first launcher whose variables are all present, in the order above.
// Not finding one is not an error (launcher stays empty); malformed values are.
Status detect_launcher(LaunchInfo* out);

// The rendezvous port a launcher-started job uses when MASTER_PORT is unset:
// derived from the job id so every rank of one job picks the same port and
// two jobs on one host rarely collide.
int default_master_port(const std::string& job_id);

}  // namespace rr::bootstrap
