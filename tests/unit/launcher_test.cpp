// Launcher detection: each launcher's variables give rank, size and job, and
// the first complete set wins.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/launcher.hpp"

namespace rr::bootstrap {
namespace {

const char* kAll[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                      "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid",
                      "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_KVSNAME",
                      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                      "SLURM_STEP_NUM_NODES", "SLURM_NNODES"};

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAll) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  static LaunchInfo detect() {
    LaunchInfo info;
    Status s = detect_launcher(&info);
    EXPECT_TRUE(s.ok()) << s.message();
    return info;
  }
};

TEST_F(Launcher, NoneFound) { EXPECT_TRUE(detect().launcher.empty()); }

TEST_F(Launcher, Torchrun) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  LaunchInfo info = detect();
  EXPECT_EQ(info.launcher, "torchrun/env");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_FALSE(info.single_host);
}

TEST_F(Launcher, OpenMpi) {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  setenv("PMIX_NAMESPACE", "prterun-vm-1234@1", 1);
  LaunchInfo info = detect();
  EXPECT_EQ(info.launcher, "OpenMPI");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_TRUE(info.single_host);
  EXPECT_NE(info.job_id.find("prterun-vm-1234@1"), std::string::npos);
}

TEST_F(Launcher, MpichPmi) {
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "2", 1);
  setenv("MPI_LOCALRANKID", "0", 1);
  setenv("MPI_LOCALNRANKS", "1", 1);
  LaunchInfo info = detect();
  EXPECT_EQ(info.launcher, "MPICH/PMI");
  EXPECT_EQ(info.size, 2);
  EXPECT_FALSE(info.single_host);
}

TEST_F(Launcher, SlurmSingleAndMultiNode) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "6", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_STEP_NUM_NODES", "3", 1);
  LaunchInfo info = detect();
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_FALSE(info.single_host);
  setenv("SLURM_STEP_NUM_NODES", "1", 1);
  EXPECT_TRUE(detect().single_host);
}

TEST_F(Launcher, TorchrunVariablesWinOverTheLaunchersBelowThem) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_EQ(detect().launcher, "torchrun/env");
}

TEST_F(Launcher, MalformedValueNamesTheVariable) {
  setenv("SLURM_PROCID", "x1", 1);
  setenv("SLURM_NTASKS", "2", 1);
  LaunchInfo info;
  Status s = detect_launcher(&info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SLURM_PROCID"), std::string::npos) << s.message();
}

TEST(DefaultMasterPort, SameJobSamePortInRange) {
  EXPECT_EQ(default_master_port("SLURM_JOB_ID=1;"), default_master_port("SLURM_JOB_ID=1;"));
  EXPECT_NE(default_master_port("SLURM_JOB_ID=1;"), default_master_port("SLURM_JOB_ID=2;"));
  for (int i = 0; i < 1000; ++i) {
    const int port = default_master_port("job" + std::to_string(i));
    EXPECT_GE(port, 29500);
    EXPECT_LT(port, 39500);
  }
}

}  // namespace
}  // namespace rr::bootstrap
