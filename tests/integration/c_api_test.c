/* The public header compiles as C (C11) and the library links from C: a
 * two-rank allreduce through the plain C API. */
#include <ringreduce/ringreduce.h>
#include <stdio.h>

int main(void) {
  rrComm_t comm = NULL;
  int version = 0, rank = 0, size = 0, i;
  float data[5];
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
  printf("rank %d: C API allreduce correct\n", rank);
  return rrCommDestroy(comm) == rrSuccess ? 0 : 1;
}
