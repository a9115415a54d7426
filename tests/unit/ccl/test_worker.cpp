// A rank as a separate process, for tests that kill ranks or check launcher-environment init.
// Env: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun style), WORKER_ITERS, WORKER_COUNT.
// WORKER_MATRIX=1 runs the collectives check matrix instead; WORKER_DIE_RANK/WORKER_DIE_ITER make
// one rank SIGKILL itself at the start of that iteration (the others are mid-collective).
// Exit: 0 all iterations correct, 1 wrong result, 10 + recclResult_t of the first failing call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <signal.h>

#include "coll_check.h"
#include "reccl/reccl.h"

int main() {
  recclComm_t comm = nullptr;
  recclResult_t rc = recclCommInitFromEnv(&comm);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker init: %s: %s\n", recclGetErrorString(rc), recclGetLastError(nullptr));
    return 10 + rc;
  }
  int rank = 0, n = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);
  int iters = getenv("WORKER_ITERS") ? atoi(getenv("WORKER_ITERS")) : 10;
  size_t count = getenv("WORKER_COUNT") ? strtoull(getenv("WORKER_COUNT"), nullptr, 10) : 1000;
  std::vector<float> in(count), out(count);
  if (getenv("WORKER_MATRIX")) {
    std::string err = reccl::test::runMatrix(rank, n, comm, {0, 1, 7}, true, true);
    if (!err.empty()) {
      fprintf(stderr, "worker rank %d: %s\n", rank, err.c_str());
      return 1;
    }
    printf("matrix ok rank %d\n", rank);
    recclCommDestroy(comm);
    return 0;
  }
  int dieRank = getenv("WORKER_DIE_RANK") ? atoi(getenv("WORKER_DIE_RANK")) : -1;
  int dieIter = getenv("WORKER_DIE_ITER") ? atoi(getenv("WORKER_DIE_ITER")) : -1;
  if (getenv("WORKER_LATENCY")) {
    // 8-byte allreduce latency, p50/p99 over 1000 iterations after 100 warm-up ones.
    std::vector<double> t;
    float x[2] = {1, 2};
    for (int it = 0; it < 1100; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      rc = recclAllReduce(x, x, 2, recclFloat32, recclSum, comm, nullptr);
      if (rc != recclSuccess) return 10 + rc;
      if (it >= 100) t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
    }
    std::sort(t.begin(), t.end());
    if (rank == 0) printf("reccl 8B allreduce p50 %.1f us p99 %.1f us\n", t[t.size() / 2], t[t.size() * 99 / 100]);
    recclCommDestroy(comm);
    return 0;
  }
  if (getenv("WORKER_BENCH")) {
    // Timing mode: allreduce busbw = 2 (n-1)/n * bytes / time, after 3 warm-up iterations.
    for (size_t i = 0; i < count; ++i) in[i] = 1.0f;
    for (int it = 0; it < iters + 3; ++it) {
      if (it == 3) recclBarrier(comm, nullptr);
      auto t0 = std::chrono::steady_clock::now();
      rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rc != recclSuccess) return 10 + rc;
      if (it >= 3 && rank == 0) {
        double bytes = count * 4.0;
        printf("bench bytes %zu time_us %.1f algbw %.3f busbw %.3f\n", count * 4, s * 1e6, bytes / s / 1e9,
               bytes / s / 1e9 * 2.0 * (n - 1) / n);
      }
    }
    if (out[0] != static_cast<float>(n)) return 1;
    recclCommDestroy(comm);
    return 0;
  }
  for (int it = 0; it < iters; ++it) {
    if (rank == dieRank && it == dieIter) raise(SIGKILL);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i + rank + it) % 5);
    rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    if (rc != recclSuccess) {
      fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
              recclGetLastError(comm));
      recclResult_t async = recclSuccess;
      recclCommGetAsyncError(comm, &async);
      recclCommAbort(comm);
      return 10 + rc;
    }
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((i + r + it) % 5);
      if (out[i] != want) {
        fprintf(stderr, "worker rank %d: wrong result at %zu\n", rank, i);
        return 1;
      }
    }
    if (it == 0) {
      printf("ready %d\n", rank);
      fflush(stdout);
    }
  }
  recclCommDestroy(comm);
  return 0;
}
