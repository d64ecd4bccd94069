// A rank for dump_test.sh: rank 1 arrives late at an allreduce, so rank 0 is
// caught waiting when the test sends SIGUSR1. Public C API only.

#include <ringreduce/ringreduce.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  rrComm_t comm = nullptr;
  if (rrCommInitFromEnv(&comm) != rrSuccess) {
    std::fprintf(stderr, "init: %s\n", rrGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  rrCommUserRank(comm, &rank);
  std::vector<float> data(size_t{1} << 20, 1.0f);
  std::printf("rank %d: ready\n", rank);
  std::fflush(stdout);
  if (rank == 1) {
    // sleep() would end early on the SIGUSR1 under test.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < until) usleep(10000);
  }
  const rrResult_t r = rrAllReduce(data.data(), data.data(), data.size(), rrFloat32, rrSum, comm, nullptr);
  if (r != rrSuccess) {
    std::fprintf(stderr, "allreduce: %s\n", rrGetLastError(comm));
    return 1;
  }
  if (rank == 0) rrCommDump(comm);  // the call form: after the call, nothing runs
  rrCommDestroy(comm);
  return 0;
}
