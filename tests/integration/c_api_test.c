/* The public header compiles as C (C11) and the library links from C: an
 * allreduce with a bitwise op, one with a per-call config (its initializer
 * in C), an uneven all-to-all and an any-source tagged receive with its
 * status, through the plain C API. */
#include <ringreduce/ringreduce.h>
#include <stdio.h>

int main(void) {
  rrComm_t comm = NULL;
  int version = 0, rank = 0, size = 0, i;
  float data[5];
  unsigned int bits = 0;
  size_t counts[64], displs[64];
  int word = 0, got = -1;
  rrRequest_t send = NULL, recv = NULL;
  rrStatus_t status;
  if (rrGetVersion(&version) != rrSuccess || version != RR_VERSION_CODE) return 1;
  if (rrCommInitFromEnv(&comm) != rrSuccess) {
    fprintf(stderr, "init: %s\n", rrGetLastError(NULL));
    return 1;
  }
  rrCommUserRank(comm, &rank);
  rrCommCount(comm, &size);
  for (i = 0; i < 5; ++i) data[i] = (float)(rank + i);
  if (rrAllReduce(data, data, 5, rrFloat32, rrSum, comm, NULL) != rrSuccess) {
    fprintf(stderr, "allreduce: %s\n", rrGetLastError(comm));
    return 1;
  }
  for (i = 0; i < 5; ++i) {
    if (data[i] != (float)(size * (size - 1) / 2 + size * i)) return 1;
  }
  bits = 1u << rank;
  if (rrAllReduce(&bits, &bits, 1, rrUint32, rrBor, comm, NULL) != rrSuccess || bits != (1u << size) - 1) return 1;
  {
    rrCollConfig_t config = RR_COLL_CONFIG_INITIALIZER;
    config.timeout_ms = 60000;
    config.algorithm = "ring";
    bits = 1u << rank;
    if (rrAllReduceConfig(&bits, &bits, 1, rrUint32, rrBor, comm, NULL, &config) != rrSuccess ||
        bits != (1u << size) - 1) {
      fprintf(stderr, "allreduce with a config: %s\n", rrGetLastError(comm));
      return 1;
    }
  }
  if (size > 64) return 1;
  for (i = 0; i < size; ++i) counts[i] = 0, displs[i] = 0;
  counts[(rank + 1) % size] = 1; /* one element to the right, sent; from the left, received */
  word = rank;
  {
    size_t recvcounts[64];
    for (i = 0; i < size; ++i) recvcounts[i] = 0;
    recvcounts[(rank + size - 1) % size] = 1;
    if (rrAllToAllv(&word, counts, displs, &got, recvcounts, displs, rrInt32, comm, NULL) != rrSuccess) {
      fprintf(stderr, "all-to-all-v: %s\n", rrGetLastError(comm));
      return 1;
    }
    if (got != (rank + size - 1) % size) return 1;
  }
  got = -1;
  if (rrIrecvTag(&got, 1, rrInt32, RR_ANY_SOURCE, 42, comm, &recv) != rrSuccess) return 1;
  if (rrIsendTag(&word, 1, rrInt32, (rank + 1) % size, 42, comm, &send) != rrSuccess) return 1;
  if (rrWaitStatus(recv, &status) != rrSuccess || rrWait(send) != rrSuccess) {
    fprintf(stderr, "tagged: %s\n", rrGetLastError(comm));
    return 1;
  }
  if (status.source != (rank + size - 1) % size || status.tag != 42 || status.count != 1 || got != status.source) {
    return 1;
  }
  printf("rank %d: C API allreduce, bor, all-to-all-v and any-source receive correct\n", rank);
  return rrCommDestroy(comm) == rrSuccess ? 0 : 1;
}
