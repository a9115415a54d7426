/* One rank as an application process, written in C against the installed-style API only
 * (reccl.h, linked with libreccl.so): joins a communicator, runs allreduce, bcast, alltoall and a
 * split, finalizes. Used by tests that start ranks as processes.
 *   api_worker uid HEX NRANKS RANK   the unique id (recclGetUniqueId's bytes as hex) from elsewhere
 *   api_worker env                   recclCommInitFromEnv (mpirun, srun, torchrun variables)
 * Prints "api_worker: rank R of N: ok" and exits 0 when every result is right; 1 for a wrong
 * value, 2 for bad arguments, 10 + recclResult_t for a failed call. */
#include <reccl/reccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 4099

static int failed(const char* what, recclResult_t r) {
  fprintf(stderr, "api_worker: %s: %s: %s\n", what, recclGetErrorString(r), recclGetLastError(NULL));
  return 10 + (int)r;
}

static int fromHex(const char* hex, recclUniqueId* id) {
  if (strlen(hex) != 2 * sizeof(id->internal)) return 0;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 0;
    id->internal[i] = (char)v;
  }
  return 1;
}

int main(int argc, char** argv) {
  recclComm_t comm = NULL;
  recclResult_t r;
  if (argc == 5 && strcmp(argv[1], "uid") == 0) {
    recclUniqueId id;
    if (!fromHex(argv[2], &id)) return 2;
    r = recclCommInitRank(&comm, atoi(argv[3]), id, atoi(argv[4]));
  } else if (argc == 2 && strcmp(argv[1], "env") == 0) {
    r = recclCommInitFromEnv(&comm);
  } else {
    fprintf(stderr, "usage: api_worker uid HEX NRANKS RANK | api_worker env\n");
    return 2;
  }
  if (r != recclSuccess) return failed("init", r);
  int rank = -1, n = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);

  static int32_t a[COUNT], send[COUNT * 16], recv[COUNT * 16];
  int wrong = 0;
  for (int i = 0; i < COUNT; ++i) a[i] = rank + 1;
  if ((r = recclAllReduce(a, a, COUNT, recclInt32, recclSum, comm, NULL)) != recclSuccess) return failed("allreduce", r);
  for (int i = 0; i < COUNT; ++i) wrong += a[i] != n * (n + 1) / 2;

  for (int i = 0; i < COUNT; ++i) a[i] = rank == n - 1 ? i : -1;
  if ((r = recclBcast(a, COUNT, recclInt32, n - 1, comm, NULL)) != recclSuccess) return failed("bcast", r);
  for (int i = 0; i < COUNT; ++i) wrong += a[i] != i;

  if (n <= 16) {
    for (int i = 0; i < COUNT * n; ++i) send[i] = rank * 100000 + i;
    if ((r = recclAlltoAll(send, recv, COUNT, recclInt32, comm, NULL)) != recclSuccess) return failed("alltoall", r);
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < COUNT; ++i) wrong += recv[p * COUNT + i] != p * 100000 + rank * COUNT + i;
  }

  recclComm_t half = NULL;
  if ((r = recclCommSplit(comm, rank % 2, rank, &half, NULL)) != recclSuccess) return failed("split", r);
  int hn = 0;
  recclCommCount(half, &hn);
  int32_t one = 1;
  if ((r = recclAllReduce(&one, &one, 1, recclInt32, recclSum, half, NULL)) != recclSuccess) return failed("split allreduce", r);
  wrong += one != hn || hn != (n - rank % 2 + 1) / 2;

  if ((r = recclCommFinalize(half)) != recclSuccess) return failed("finalize (split)", r);
  if ((r = recclCommFinalize(comm)) != recclSuccess) return failed("finalize", r);
  recclCommDestroy(half);
  recclCommDestroy(comm);
  printf("api_worker: rank %d of %d: %s\n", rank, n, wrong ? "WRONG" : "ok");
  return wrong ? 1 : 0;
}
