// A rank as a separate process, for tests that kill ranks or check launcher-environment init.
// Env: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun style), WORKER_ITERS, WORKER_COUNT.
// WORKER_MATRIX=1 runs the collectives check matrix instead (WORKER_COMMS=2: on two communicators
// at once, the second rendezvousing at MASTER_PORT + 1; WORKER_COUNTS=0,1,7,1003 sets the counts,
// WORKER_LARGE_COUNT the large subset's, 1M+3 by default);
// WORKER_IDLE_MS=N: CPU time of an idle communicator over N ms; WORKER_DIE_RANK/WORKER_DIE_ITER make
// one rank SIGKILL itself at the start of that iteration (the others are mid-collective); with
// WORKER_SHRINK=1 the others then shrink the communicator without it (RECCL_SHRINK_ABORT) and run
// WORKER_ITERS checked allreduces on the child, printing "shrunk rank R of N" on stderr
// (WORKER_SHRINK=revoke: recclCommRevoke first, printing "revoked: E", E what recclCommGetAsyncError
// reports once it is no longer in progress, and a RECCL_SHRINK_DEFAULT shrink);
// WORKER_CHANNEL_THREADS=1,3,2: RECCL_CHANNEL_THREADS of rank r is the list's entry r mod its length
// (ranks that ask for different channel threads). WORKER_UNTIL_FILE=path: the plain allreduce loop
// runs until that file exists (at most WORKER_ITERS iterations), every rank stopping after the same one;
// WORKER_READY_FILE=path: rank 0 creates it once the first allreduce was right.
// Exit: 0 all iterations correct, 1 wrong result, 10 + recclResult_t of the first failing call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "coll_check.h"
#include "reccl/reccl.h"

namespace {
// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> commaList(const char* list) {
  std::vector<std::string> each;
  for (const char* p = list;; ++p) {
    const char* end = strchr(p, ',');
    each.emplace_back(p, end ? end : p + strlen(p));
    if (!end) return each;
    p = end;
  }
}
// The plain allreduce loop's data: rank r's element i in iteration `it` is (i + r + it) % 5.
void fillIteration(std::vector<float>& in, int rank, int it) {
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i + rank + it) % 5);
}
// The first element of `out` that is not the sum over n ranks, or out.size().
size_t firstWrong(const std::vector<float>& out, int n, int it) {
  for (size_t i = 0; i < out.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>((i + r + it) % 5);
    if (out[i] != want) return i;
  }
  return out.size();
}

// After rank `dead` died: the communicator without it, then `iters` checked allreduces on it.
int shrinkAndGoOn(recclComm_t comm, int dead, int iters, size_t count) {
  int parentRank = 0;
  recclCommUserRank(comm, &parentRank);
  recclComm_t child = nullptr;
  int flags = RECCL_SHRINK_ABORT;
  if (const char* how = getenv("WORKER_SHRINK"); how && strcmp(how, "revoke") == 0) {
    recclResult_t rc = recclCommRevoke(comm, RECCL_REVOKE_DEFAULT);
    recclResult_t async = recclInProgress;
    for (int i = 0; rc == recclSuccess && async == recclInProgress && i < 1000; ++i) {
      rc = recclCommGetAsyncError(comm, &async);
      if (async == recclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (rc != recclSuccess || async == recclInProgress) {
      fprintf(stderr, "worker rank %d: recclCommRevoke: %s: %s\n", parentRank,
              rc != recclSuccess ? recclGetErrorString(rc) : "still in progress after 10 s", recclGetLastError(comm));
      return 10 + (rc != recclSuccess ? rc : recclInProgress);
    }
    fprintf(stderr, "revoked: %s\n", recclGetErrorString(async));
    flags = RECCL_SHRINK_DEFAULT;
  }
  recclResult_t rc = recclCommShrink(comm, &dead, 1, &child, nullptr, flags);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d: recclCommShrink: %s: %s\n", parentRank, recclGetErrorString(rc),
            recclGetLastError(comm));
    return 10 + rc;
  }
  int rank = 0, n = 0;
  recclCommUserRank(child, &rank);
  recclCommCount(child, &n);
  std::vector<float> in(count), out(count);
  for (int it = 0; it < iters; ++it) {
    fillIteration(in, rank, it);
    rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, child, nullptr);
    if (rc != recclSuccess) {
      fprintf(stderr, "worker rank %d: allreduce on the shrunk communicator: %s: %s\n", parentRank,
              recclGetErrorString(rc), recclGetLastError(child));
      return 10 + rc;
    }
    if (size_t bad = firstWrong(out, n, it); bad < count) {
      fprintf(stderr, "worker rank %d: wrong result on the shrunk communicator at %zu\n", parentRank, bad);
      return 1;
    }
  }
  fprintf(stderr, "shrunk rank %d of %d (was %d)\n", rank, n, parentRank);
  recclCommDestroy(child);
  recclCommDestroy(comm);
  return 0;
}

}  // namespace

int main() {
  if (const char* list = getenv("WORKER_CHANNEL_THREADS")) {
    std::vector<std::string> each = commaList(list);
    const char* r = getenv("RANK");
    setenv("RECCL_CHANNEL_THREADS", each[static_cast<size_t>(r ? atoi(r) : 0) % each.size()].c_str(), 1);
  }
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
  // WORKER_COUNTS=0,1,7,1003: the matrix's element counts (default 0,1,7).
  std::vector<size_t> counts = {0, 1, 7};
  if (const char* c = getenv("WORKER_COUNTS")) {
    counts.clear();
    for (const std::string& item : commaList(c)) {
      char* end = nullptr;
      counts.push_back(strtoull(item.c_str(), &end, 10));
      if (item.empty() || *end != '\0') {
        fprintf(stderr, "worker: WORKER_COUNTS: expected a comma list of counts, got '%s'\n", c);
        return 1;
      }
    }
  }
  if (getenv("WORKER_MATRIX") && getenv("WORKER_COMMS") && atoi(getenv("WORKER_COMMS")) == 2) {
    // A second communicator over the same ranks, then both matrices at the same time on two
    // threads: their connections, steps and shm segments must not mix.
    const char* port = getenv("MASTER_PORT");
    if (!port) {
      fprintf(stderr, "worker rank %d: WORKER_COMMS=2 needs MASTER_PORT\n", rank);
      return 1;
    }
    setenv("MASTER_PORT", std::to_string(atoi(port) + 1).c_str(), 1);
    recclComm_t comm2 = nullptr;
    rc = recclCommInitFromEnv(&comm2);
    if (rc != recclSuccess) {
      fprintf(stderr, "worker rank %d: second communicator: %s: %s\n", rank, recclGetErrorString(rc),
              recclGetLastError(nullptr));
      return 10 + rc;
    }
    std::string err1, err2;
    std::thread t([&] { err2 = reccl::test::runMatrix(rank, n, comm2, {1, 7, 1003}, false, true); });
    err1 = reccl::test::runMatrix(rank, n, comm, counts, true, false);
    t.join();
    if (!err1.empty() || !err2.empty()) {
      fprintf(stderr, "worker rank %d: comm 1: %s comm 2: %s\n", rank, err1.c_str(), err2.c_str());
      return 1;
    }
    printf("concurrent ok rank %d\n", rank);
    recclCommDestroy(comm2);
    recclCommDestroy(comm);
    return 0;
  }
  if (getenv("WORKER_MATRIX")) {
    std::string err = reccl::test::runMatrix(rank, n, comm, counts, true, true);
    if (!err.empty()) {
      fprintf(stderr, "worker rank %d: %s\n", rank, err.c_str());
      return 1;
    }
    printf("matrix ok rank %d\n", rank);
    recclCommDestroy(comm);
    return 0;
  }
  const char* untilFile = getenv("WORKER_UNTIL_FILE");
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
  if (getenv("WORKER_IDLE_MS")) {
    // CPU this process burns while its communicator sits idle (connections up, nothing to do):
    // what the failover machinery (monitor poll, stall checks, detector) costs with no fault.
    float x[2] = {1, 2};
    for (int it = 0; it < 3; ++it) {
      rc = recclAllReduce(x, x, 2, recclFloat32, recclSum, comm, nullptr);
      if (rc != recclSuccess) return 10 + rc;
    }
    // Let set-up work (detector loading on the monitor thread) finish before measuring.
    usleep(2'000'000);
    auto cpuUs = [] {
      rusage ru{};
      getrusage(RUSAGE_SELF, &ru);
      return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    };
    long ms = atol(getenv("WORKER_IDLE_MS"));
    double c0 = cpuUs();
    auto t0 = std::chrono::steady_clock::now();
    usleep(static_cast<useconds_t>(ms) * 1000);
    double wallUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    double c1 = cpuUs();
    printf("idle rank %d cpu_us %.0f wall_us %.0f cpu_per_s_us %.1f\n", rank, c1 - c0, wallUs, (c1 - c0) / wallUs * 1e6);
    rc = recclAllReduce(x, x, 2, recclFloat32, recclSum, comm, nullptr);
    if (rc != recclSuccess) return 10 + rc;
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
    fillIteration(in, rank, it);
    rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
    if (rc != recclSuccess && getenv("WORKER_SHRINK") && dieRank >= 0) return shrinkAndGoOn(comm, dieRank, iters, count);
    if (rc != recclSuccess) {
      fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
              recclGetLastError(comm));
      recclResult_t async = recclSuccess;
      recclCommGetAsyncError(comm, &async);
      recclCommAbort(comm);
      return 10 + rc;
    }
    if (size_t bad = firstWrong(out, n, it); bad < count) {
      fprintf(stderr, "worker rank %d: wrong result at %zu\n", rank, bad);
      return 1;
    }
    if (it == 0) {
      printf("ready %d\n", rank);
      fflush(stdout);
      const char* readyFile = getenv("WORKER_READY_FILE");
      if (readyFile && rank == 0) {
        if (FILE* f = fopen(readyFile, "w")) fclose(f);
      }
    }
    if (untilFile) {
      // The ranks see the file at different iterations: they agree through an allreduce of who saw it.
      float seen = access(untilFile, F_OK) == 0 ? 1.0f : 0.0f;
      rc = recclAllReduce(&seen, &seen, 1, recclFloat32, recclSum, comm, nullptr);
      if (rc != recclSuccess) {
        fprintf(stderr, "worker rank %d stop vote: %s: %s\n", rank, recclGetErrorString(rc), recclGetLastError(comm));
        return 10 + rc;
      }
      if (seen > 0) break;
    }
  }
  recclCommDestroy(comm);
  return 0;
}
