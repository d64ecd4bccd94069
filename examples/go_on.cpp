// Training that goes on when a rank dies (ULFM's way, in the C API): the
// ranks average their gradients with allreduce after every step; the last
// rank dies at step 20 (SIGKILL, as a crashed node); the others' allreduce
// fails naming it, each revokes the communicator (rrCommRevoke), they agree
// among themselves who failed and make a communicator without it
// (rrCommShrinkFailed: no list, no store, no new rendezvous), and train on
// in it from the same parameters. At the end every survivor checks that its
// parameters equal every other's. Run under a launcher that lets the others
// go on when one dies:
//
//   build/tools/rr-run --enable-recovery -n 4 build/examples/go_on
#include <ringreduce/ringreduce.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int kSteps = 50;
constexpr int kDiesAt = 20;
constexpr size_t kParams = 1000;

// The gradient of 0.5 |w - t|^2 with rank r's target t_k = r + k % 7.
void gradient(const std::vector<double>& w, int rank, std::vector<double>* g) {
  for (size_t k = 0; k < w.size(); ++k) (*g)[k] = w[k] - (rank + static_cast<double>(k % 7));
}

}  // namespace

int main() {
  rrComm_t comm = nullptr;
  if (rrCommInitFromEnv(&comm) != rrSuccess) {
    std::fprintf(stderr, "init: %s\n", rrGetLastError(nullptr));
    return 1;
  }
  int rank = 0, size = 0;
  rrCommUserRank(comm, &rank);
  rrCommCount(comm, &size);
  const int first_rank = rank, first_size = size;
  std::vector<double> w(kParams, 0.0), g(kParams);
  for (int step = 0; step < kSteps; ++step) {
    if (first_rank == first_size - 1 && first_size > 1 && step == kDiesAt) raise(SIGKILL);
    gradient(w, first_rank, &g);
    const rrResult_t r = rrAllReduce(g.data(), g.data(), kParams, rrFloat64, rrAvg, comm, nullptr);
    if (r != rrSuccess) {
      // A peer is gone: the survivors go on without it.
      std::printf("rank %d: step %d failed: %s\n", rank, step, rrGetLastError(comm));
      rrCommRevoke(comm);
      rrComm_t survivors = nullptr;
      std::vector<int> lost(static_cast<size_t>(size));
      int n_lost = 0;
      if (rrCommShrinkFailed(comm, &survivors, lost.data(), &n_lost, nullptr) != rrSuccess) {
        std::fprintf(stderr, "rank %d: shrink: %s\n", rank, rrGetLastError(comm));
        return 1;
      }
      rrCommDestroy(comm);
      comm = survivors;
      rrCommUserRank(comm, &rank);
      rrCommCount(comm, &size);
      // A rank may have finished the failed step before the others failed
      // theirs (the dead one had sent it everything): all take the new rank
      // 0's parameters and step, and go on from there.
      std::vector<double> state(w);
      state.push_back(step);
      if (rrBroadcast(state.data(), state.data(), state.size(), rrFloat64, 0, comm, nullptr) != rrSuccess) {
        std::fprintf(stderr, "rank %d: %s\n", rank, rrGetLastError(comm));
        return 1;
      }
      w.assign(state.begin(), state.end() - 1);
      step = static_cast<int>(state.back()) - 1;  // that step again, among the survivors
      std::printf("rank %d of %d (rank %d of %d at the start): %d rank(s) lost (the first: %d), training on\n", rank,
                  size, first_rank, first_size, n_lost, n_lost > 0 ? lost[0] : -1);
      continue;
    }
    for (size_t k = 0; k < kParams; ++k) w[k] -= 0.1 * g[k];
  }
  // Every survivor holds the same parameters: their minimum and maximum agree.
  std::vector<double> low(w), high(w);
  if (rrAllReduce(low.data(), low.data(), kParams, rrFloat64, rrMin, comm, nullptr) != rrSuccess ||
      rrAllReduce(high.data(), high.data(), kParams, rrFloat64, rrMax, comm, nullptr) != rrSuccess) {
    std::fprintf(stderr, "rank %d: %s\n", rank, rrGetLastError(comm));
    return 1;
  }
  for (size_t k = 0; k < kParams; ++k) {
    if (low[k] != high[k]) {
      std::fprintf(stderr, "rank %d: parameter %zu differs across the survivors\n", rank, k);
      return 1;
    }
  }
  std::printf("rank %d of %d: %d steps done, the replicas identical\n", rank, size, kSteps);
  rrCommDestroy(comm);
  return 0;
}
