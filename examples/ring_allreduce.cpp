// A ring allreduce written by hand from point-to-point calls, after the
// PyTorch tutorial's "Our Own Ring-Allreduce", checked against rrAllReduce.
// Each step every rank sends to its right and receives from its left at
// once, which is what rrGroupStart/rrGroupEnd are for.
// Run: rr-run -n 4 examples/ring_allreduce
#include <ringreduce/ringreduce.h>

#include <cstdio>
#include <vector>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    rrResult_t r_ = (call);                                                               \
    if (r_ != rrSuccess) {                                                                \
      std::fprintf(stderr, "%s: %s: %s\n", #call, rrGetErrorString(r_), rrGetLastError(comm)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main() {
  rrComm_t comm = nullptr;
  CHECK(rrCommInitFromEnv(&comm));
  int rank = 0, size = 0;
  CHECK(rrCommUserRank(comm, &rank));
  CHECK(rrCommCount(comm, &size));
  const int right = (rank + 1) % size, left = (rank - 1 + size) % size;

  // Integer-valued floats: every order of summation gives the same answer.
  const size_t count = 1000;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 101);

  // The tutorial's algorithm: pass a buffer around the ring N-1 times,
  // adding what arrives.
  std::vector<float> accum = data, send = data, recv(count);
  for (int step = 0; step < size - 1; ++step) {
    CHECK(rrGroupStart());
    CHECK(rrSend(send.data(), count, rrFloat32, right, comm, nullptr));
    CHECK(rrRecv(recv.data(), count, rrFloat32, left, comm, nullptr));
    CHECK(rrGroupEnd());
    for (size_t i = 0; i < count; ++i) accum[i] += recv[i];
    send.swap(recv);
  }

  std::vector<float> reference(count);
  CHECK(rrAllReduce(data.data(), reference.data(), count, rrFloat32, rrSum, comm, nullptr));
  const bool ok = accum == reference;
  std::printf("Rank %d: hand-written ring %s rrAllReduce (element 0: %.0f)\n", rank, ok ? "matches" : "DIFFERS FROM",
              accum[0]);
  CHECK(rrCommDestroy(comm));
  return ok ? 0 : 1;
}
