/* Sum a vector over every rank. Ranks and the rendezvous come from the launcher:
 *   mpirun -np 2 ./allreduce
 *   srun -N 2 --ntasks-per-node 1 ./allreduce
 *   torchrun --nnodes 2 --nproc-per-node 1 ... (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
 * Exit status 0 when every element is right. */
#include <reccl/reccl.h>

#include <stdio.h>
#include <stdlib.h>

#define COUNT (1 << 20)

static int check(recclResult_t r, const char* what) {
  if (r == recclSuccess) return 1;
  fprintf(stderr, "%s: %s: %s\n", what, recclGetErrorString(r), recclGetLastError(NULL));
  return 0;
}

int main(void) {
  recclComm_t comm = NULL;
  if (!check(recclCommInitFromEnv(&comm), "recclCommInitFromEnv")) return 1;
  int rank = 0, nranks = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &nranks);

  float* buf = malloc(COUNT * sizeof(float));
  if (!buf) return 1;
  for (int i = 0; i < COUNT; ++i) buf[i] = (float)(rank + 1);
  /* In place: sendbuff == recvbuff. A NULL stream: the call returns when it is done. */
  if (!check(recclAllReduce(buf, buf, COUNT, recclFloat32, recclSum, comm, NULL), "recclAllReduce")) {
    recclCommAbort(comm);
    return 1;
  }
  const float want = (float)nranks * (float)(nranks + 1) / 2.0f;
  long wrong = 0;
  for (int i = 0; i < COUNT; ++i) wrong += buf[i] != want;
  printf("rank %d of %d: allreduce of %d floats: %s (each %g)\n", rank, nranks, COUNT, wrong ? "WRONG" : "ok", buf[0]);
  free(buf);

  if (!check(recclCommFinalize(comm), "recclCommFinalize")) {
    recclCommAbort(comm);
    return 1;
  }
  recclCommDestroy(comm);
  return wrong ? 1 : 0;
}
