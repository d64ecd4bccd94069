#include "bootstrap/launcher.hpp"

#include <cstdint>

#include "common/env.hpp"

namespace rr::bootstrap {

namespace {

struct Spelling {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* job[3];  // variables whose values, joined, name the job step
};

// torchrun (and rr-run) first: it also sets the variables the others read.
constexpr Spelling kLaunchers[] = {
    {"torchrun/env", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", {"TORCHELASTIC_RUN_ID", nullptr, nullptr}},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", {"OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", {"PMI_KVSNAME", "PMIX_NAMESPACE", nullptr}},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr,
     {"SLURM_JOB_ID", "SLURM_STEP_ID", nullptr}},
};

Status read_int(const char* name, int64_t max, int* out) {
  if (!name) return Status::Ok();
  int64_t value = 0;
  bool found = false;
  RR_RETURN_IF_ERROR(env_int(name, 0, max, &value, &found));
  if (found) *out = static_cast<int>(value);
  return Status::Ok();
}

}  // namespace

Status detect_launcher(LaunchInfo* out) {
  LaunchInfo info;
  for (const Spelling& s : kLaunchers) {
    if (!env_str(s.rank) || !env_str(s.size)) continue;
    info.launcher = s.launcher;
    RR_RETURN_IF_ERROR(read_int(s.rank, (1 << 24) - 1, &info.rank));
    RR_RETURN_IF_ERROR(read_int(s.size, 1 << 24, &info.size));
    RR_RETURN_IF_ERROR(read_int(s.local_rank, (1 << 24) - 1, &info.local_rank));
    RR_RETURN_IF_ERROR(read_int(s.local_size, 1 << 24, &info.local_size));
    for (const char* job : s.job) {
      if (job && env_str(job)) info.job_id += std::string(job) + "=" + env_str(job) + ";";
    }
    info.single_host = info.local_size > 0 && info.local_size == info.size;
    if (std::string(s.launcher) == "Slurm") {
      int nodes = 0;
      RR_RETURN_IF_ERROR(read_int("SLURM_STEP_NUM_NODES", 1 << 24, &nodes));
      if (nodes == 0) RR_RETURN_IF_ERROR(read_int("SLURM_NNODES", 1 << 24, &nodes));
      info.single_host = nodes == 1;
    }
    break;
  }
  *out = std::move(info);
  return Status::Ok();
}

int default_master_port(const std::string& job_id) {
  // FNV-1a over the job id, folded into 29500..39499 (above torch's default).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : job_id) h = (h ^ c) * 1099511628211ull;
  return 29500 + static_cast<int>(h % 10000);
}

}  // namespace rr::bootstrap
