// One rank of link_cut_test.sh: allreduces 64 MiB of floats over and over
// until a call fails (the script cuts a link under it) or SECONDS pass.
// Public C API only; settings come from the environment (env://, RR_TIMEOUT_MS).
//
// Prints, one line each, flushed at once so the script can read them live:
//   rank R: ready                       after the first allreduce succeeded
//   rank R: FAILED result=<result> after S.SSS s: <last error>
//                                       S from the start of the failing call
//   rank R: OK                          SECONDS passed without a failure
// Exit status: 0 OK, 1 FAILED, 2 bad usage or init failed.
//
// usage: link_cut_rank SECONDS
#include <ringreduce/ringreduce.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// 64 MiB: dozens of chunks are in flight on every link when the cut comes.
constexpr size_t kFloatCount = size_t{16} << 20;

}  // namespace

int main(int argc, char** argv) {
  char* end = nullptr;
  const double run_seconds = argc == 2 ? std::strtod(argv[1], &end) : 0;
  if (argc != 2 || end == argv[1] || *end != '\0' || !(run_seconds > 0)) {
    std::fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
    return 2;
  }
  rrComm_t comm = nullptr;
  const rrResult_t init_result = rrCommInitFromEnv(&comm);
  if (init_result != rrSuccess) {
    std::printf("rank ?: init FAILED result=%s: %s\n", rrGetErrorString(init_result), rrGetLastError(nullptr));
    return 2;
  }
  int rank = -1;
  if (rrCommUserRank(comm, &rank) != rrSuccess) return 2;

  // Out of place: the input stays all ones, so no call sees a grown sum.
  const std::vector<float> send(kFloatCount, 1.0f);
  std::vector<float> recv(kFloatCount);
  const auto run_start = Clock::now();
  bool ready = false;
  while (std::chrono::duration<double>(Clock::now() - run_start).count() < run_seconds) {
    const auto call_start = Clock::now();
    const rrResult_t result = rrAllReduce(send.data(), recv.data(), send.size(), rrFloat32, rrSum, comm, nullptr);
    if (result != rrSuccess) {
      const double seconds = std::chrono::duration<double>(Clock::now() - call_start).count();
      std::printf("rank %d: FAILED result=%s after %.3f s: %s\n", rank, rrGetErrorString(result), seconds,
                  rrGetLastError(comm));
      std::fflush(stdout);
      // Abort, not destroy: destroy flushes to the peers, and waits up to
      // 2 s for one that is cut off; abort returns within a second.
      (void)rrCommAbort(comm);
      return 1;
    }
    if (!ready) {
      std::printf("rank %d: ready\n", rank);
      std::fflush(stdout);
      ready = true;
    }
  }
  std::printf("rank %d: OK\n", rank);
  std::fflush(stdout);
  return rrCommDestroy(comm) == rrSuccess ? 0 : 2;
}
