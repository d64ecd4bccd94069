// Point-to-point, after PyTorch's "Writing Distributed Applications":
// rank 0 sends a tensor to rank 1, first blocking (send/recv), then
// non-blocking (isend/irecv, then wait). Run: rr-run -n 2 examples/p2p
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
  if (size < 2) {
    std::printf("p2p needs two ranks\n");
    return rrCommDestroy(comm) == rrSuccess ? 0 : 1;
  }

  // Blocking: rank 0 sends 1.0 to rank 1.
  float tensor = 0.0f;
  if (rank == 0) {
    tensor += 1;
    CHECK(rrSend(&tensor, 1, rrFloat32, 1, comm, nullptr));
  } else if (rank == 1) {
    CHECK(rrRecv(&tensor, 1, rrFloat32, 0, comm, nullptr));
  }
  std::printf("Rank %d has data %.1f after send/recv\n", rank, tensor);

  // Non-blocking: the same, but the rank may work while the bytes move.
  std::vector<float> block(1 << 16, 0.0f);
  rrRequest_t request = nullptr;
  if (rank == 0) {
    for (float& x : block) x = 2.0f;
    CHECK(rrIsend(block.data(), block.size(), rrFloat32, 1, comm, &request));
  } else if (rank == 1) {
    CHECK(rrIrecv(block.data(), block.size(), rrFloat32, 0, comm, &request));
  }
  if (request) CHECK(rrWait(request));
  std::printf("Rank %d has data %.1f after isend/irecv\n", rank, block.back());

  const bool ok = rank > 1 || (tensor == 1.0f && block.back() == 2.0f);
  CHECK(rrCommDestroy(comm));
  return ok ? 0 : 1;
}
