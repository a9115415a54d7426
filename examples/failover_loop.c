/* A training-style loop that keeps going through last-hop link faults: each step allreduces a
 * gradient-sized buffer; reccl moves traffic off a failed link by itself, and the loop reads the
 * communicator's counters (recclCommGetStats) to log each failover and fail-back as it happens.
 * Only a fault reccl cannot route around (every rail of a host down, a peer process gone) ends a
 * call with an error; then the job aborts the communicator and would restart from a checkpoint.
 *   mpirun -np 2 ./failover_loop [steps]     (default 200 steps of 16 MiB) */
#include <reccl/reccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  const long steps = argc > 1 ? atol(argv[1]) : 200;
  const size_t count = (16u << 20) / sizeof(float);
  recclComm_t comm = NULL;
  recclResult_t r = recclCommInitFromEnv(&comm);
  if (r != recclSuccess) {
    fprintf(stderr, "init: %s: %s\n", recclGetErrorString(r), recclGetLastError(NULL));
    return 1;
  }
  int rank = 0;
  recclCommUserRank(comm, &rank);
  float* grad = malloc(count * sizeof(float));
  if (!grad) return 1;

  recclCommStats_t stats = {.size = sizeof(stats)};
  uint64_t failovers = 0, failbacks = 0;
  for (long step = 0; step < steps; ++step) {
    for (size_t i = 0; i < count; ++i) grad[i] = 1.0f;
    r = recclAllReduce(grad, grad, count, recclFloat32, recclSum, comm, NULL);
    if (r != recclSuccess) {
      /* recclNetworkError: no path left; recclRemoteError: a peer is gone; recclTimeout. */
      fprintf(stderr, "rank %d step %ld: %s: %s: aborting (restart from a checkpoint)\n", rank, step,
              recclGetErrorString(r), recclGetLastError(comm));
      recclCommAbort(comm);
      free(grad);
      return 1;
    }
    if (recclCommGetStats(comm, &stats) != recclSuccess) break;
    if (stats.failovers != failovers || stats.failbacks != failbacks) {
      printf("rank %d step %ld: failovers %llu, failbacks %llu, rails up %u of %u, last failover %llu us (%s)\n", rank,
             step, (unsigned long long)stats.failovers, (unsigned long long)stats.failbacks, stats.railsUp,
             stats.railsTotal, (unsigned long long)stats.lastFailoverUs, stats.faultSourceName);
      failovers = stats.failovers;
      failbacks = stats.failbacks;
    }
  }
  int nranks = 0;
  recclCommCount(comm, &nranks);
  const int exact = grad[0] == (float)nranks;
  printf("rank %d: %ld steps, %llu collectives, %llu failovers, fault source %s, last result %s\n", rank, steps,
         (unsigned long long)stats.collectives, (unsigned long long)stats.failovers, stats.faultSourceName,
         exact ? "exact" : "WRONG");
  free(grad);
  recclCommFinalize(comm);
  recclCommDestroy(comm);
  return exact ? 0 : 1;
}
