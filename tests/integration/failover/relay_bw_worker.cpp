// Allreduce bandwidth timeline for bench/failover/relay_bw.sh: each rank runs float32 sum
// allreduces of WORKER_COUNT elements for WORKER_SECONDS (rank 0's clock, agreed on by a
// 1-element max-allreduce after every iteration) and rank 0 prints each call's end time
// (CLOCK_REALTIME ns) and duration; only the allreduce call itself is timed. Every result is
// checked against the closed form (small integers: exact in any order) outside the timed part.
// Output: "iter K end_ns T dur_us D" (rank 0), "relay rank R migrations M forwarded B" at the end.
// Exit: 0 all correct, 1 wrong result, 10 + recclResult_t of a failing call.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "reccl/reccl.h"

namespace {
float val(int rank, size_t i, int it) { return static_cast<float>((i * 5 + rank * 11 + it) % 16); }
}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  recclComm_t comm = nullptr;
  if (recclResult_t rc = recclCommInitFromEnv(&comm); rc != recclSuccess) {
    fprintf(stderr, "init: %s: %s\n", recclGetErrorString(rc), recclGetLastError(nullptr));
    return 10 + rc;
  }
  int rank = 0, n = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);
  size_t count = getenv("WORKER_COUNT") ? strtoull(getenv("WORKER_COUNT"), nullptr, 10) : (4u << 20);
  double runFor = getenv("WORKER_SECONDS") ? atof(getenv("WORKER_SECONDS")) : 5;
  std::vector<float> in(count), out(count);
  auto fail = [&](const char* what, recclResult_t rc, int it) {
    fprintf(stderr, "worker rank %d iteration %d: %s: %s: %s\n", rank, it, what, recclGetErrorString(rc),
            recclGetLastError(comm));
    return 10 + rc;
  };
  if (recclResult_t rc = recclBarrier(comm, nullptr); rc != recclSuccess) return fail("barrier", rc, -1);
  printf("started rank %d\n", rank);
  auto t0 = std::chrono::steady_clock::now();
  int it = 0;
  for (;; ++it) {
    for (size_t i = 0; i < count; ++i) in[i] = val(rank, i, it);
    auto s0 = std::chrono::steady_clock::now();
    recclResult_t rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    double us = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count() * 1e6;
    if (rc != recclSuccess) return fail("allreduce", rc, it);
    if (rank == 0) {
      timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      printf("iter %d end_ns %lld dur_us %.0f\n", it, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, us);
    }
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += val(r, i, it);
      if (out[i] != want) {
        fprintf(stderr, "worker rank %d iteration %d: wrong result at %zu: %g != %g\n", rank, it, i, out[i], want);
        return 1;
      }
    }
    int32_t stop = rank == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > runFor;
    if ((rc = recclAllReduce(&stop, &stop, 1, recclInt32, recclMax, comm, nullptr)) != recclSuccess)
      return fail("stop vote", rc, it);
    if (stop) break;
  }
  recclCommStats_t st{};
  st.size = sizeof(st);
  recclCommGetStats(comm, &st);
  printf("done rank %d iters %d failovers %llu\n", rank, it + 1, (unsigned long long)st.failovers);
  printf("relay rank %d migrations %llu forwarded %llu\n", rank, (unsigned long long)st.relayMigrations,
         (unsigned long long)st.relayBytesForwarded);
  recclCommDestroy(comm);
  return 0;
}
