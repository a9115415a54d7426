// A rank for the failover tests: runs a collective loop while the test takes rails down and up,
// and checks every result bit for bit against the closed-form fault-free result (small integers
// in float32: every sum is exact, whatever the reduction order).
// Env: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (reccl testbed run), WORKER_ITERS (200),
// WORKER_COUNT (elements, 1M), WORKER_COLL (allreduce, allgather, reducescatter, broadcast,
// reduce, alltoall, or all: one after the other), WORKER_SECONDS (run until rank 0 has run this
// long, agreed on by a 1-element max-allreduce per iteration, instead of a fixed count).
// Output: "started rank R" once connected; "done rank R iters N failovers F failbacks B resent X
// dup D last_us L" at the end; "worker rank R iteration K: <error>" on failure.
// Exit: 0 all correct, 1 wrong result, 10 + recclResult_t of the first failing call.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "reccl/reccl.h"

namespace {

float val(int rank, size_t i, int it) { return static_cast<float>((i * 7 + rank * 13 + it * 3) % 32); }

const char* kColls[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"};

// Runs one collective and checks it; returns 0, 1 (wrong) or 10 + rc.
int runOne(const std::string& coll, recclComm_t comm, int rank, int n, size_t count, int it,
           std::vector<float>& in, std::vector<float>& out, std::vector<float>& want) {
  recclResult_t rc = recclSuccess;
  size_t outCount = count;
  if (coll == "allreduce") {
    in.resize(count);
    for (size_t i = 0; i < count; ++i) in[i] = val(rank, i, it);
    out.assign(count, -1.0f);
    want.assign(count, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want[i] += val(r, i, it);
    rc = recclAllReduce(in.data(), out.data(), count, recclFloat32, recclSum, comm, nullptr);
  } else if (coll == "allgather") {
    size_t per = count / n;
    in.resize(per);
    for (size_t i = 0; i < per; ++i) in[i] = val(rank, i, it);
    outCount = per * n;
    out.assign(outCount, -1.0f);
    want.resize(outCount);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[r * per + i] = val(r, i, it);
    rc = recclAllGather(in.data(), out.data(), per, recclFloat32, comm, nullptr);
  } else if (coll == "reducescatter") {
    size_t per = count / n;
    in.resize(per * n);
    for (size_t i = 0; i < per * n; ++i) in[i] = val(rank, i, it);
    outCount = per;
    out.assign(per, -1.0f);
    want.assign(per, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[i] += val(r, rank * per + i, it);
    rc = recclReduceScatter(in.data(), out.data(), per, recclFloat32, recclSum, comm, nullptr);
  } else if (coll == "broadcast") {
    int root = it % n;
    in.resize(count);
    for (size_t i = 0; i < count; ++i) in[i] = val(rank, i, it);
    out.assign(count, -1.0f);
    want.resize(count);
    for (size_t i = 0; i < count; ++i) want[i] = val(root, i, it);
    rc = recclBroadcast(in.data(), out.data(), count, recclFloat32, root, comm, nullptr);
  } else if (coll == "reduce") {
    int root = it % n;
    in.resize(count);
    for (size_t i = 0; i < count; ++i) in[i] = val(rank, i, it);
    out.assign(count, -1.0f);
    want.assign(count, 0.0f);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want[i] += val(r, i, it);
    rc = recclReduce(in.data(), out.data(), count, recclFloat32, recclSum, root, comm, nullptr);
    if (rank != root) want = out;  // only the root's buffer is defined
  } else if (coll == "alltoall") {
    size_t per = count / n;
    in.resize(per * n);
    for (size_t i = 0; i < per * n; ++i) in[i] = val(rank, i, it);
    outCount = per * n;
    out.assign(outCount, -1.0f);
    want.resize(outCount);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i) want[r * per + i] = val(r, rank * per + i, it);
    rc = recclAllToAll(in.data(), out.data(), per, recclFloat32, comm, nullptr);
  } else {
    fprintf(stderr, "worker: unknown WORKER_COLL %s\n", coll.c_str());
    return 1;
  }
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
            recclGetLastError(comm));
    return 10 + rc;
  }
  if (std::memcmp(out.data(), want.data(), outCount * sizeof(float)) != 0) {
    size_t bad = 0;
    while (bad < outCount && std::memcmp(&out[bad], &want[bad], sizeof(float)) == 0) ++bad;
    fprintf(stderr, "worker rank %d iteration %d: wrong %s result at %zu: %g != %g\n", rank, it, coll.c_str(), bad,
            out[bad], want[bad]);
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  recclComm_t comm = nullptr;
  recclResult_t rc = recclCommInitFromEnv(&comm);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker init: %s: %s\n", recclGetErrorString(rc), recclGetLastError(nullptr));
    return 10 + rc;
  }
  int rank = 0, n = 0;
  recclCommUserRank(comm, &rank);
  recclCommCount(comm, &n);
  int iters = getenv("WORKER_ITERS") ? atoi(getenv("WORKER_ITERS")) : 200;
  size_t count = getenv("WORKER_COUNT") ? strtoull(getenv("WORKER_COUNT"), nullptr, 10) : (1u << 20);
  std::string coll = getenv("WORKER_COLL") ? getenv("WORKER_COLL") : "allreduce";
  std::vector<float> in, out, want;
  // Everybody connected before the test injects anything.
  rc = recclBarrier(comm, nullptr);
  if (rc != recclSuccess) {
    fprintf(stderr, "worker rank %d iteration -1: %s: %s\n", rank, recclGetErrorString(rc), recclGetLastError(comm));
    return 10 + rc;
  }
  printf("started rank %d\n", rank);
  auto t0 = std::chrono::steady_clock::now();
  double runFor = getenv("WORKER_SECONDS") ? atof(getenv("WORKER_SECONDS")) : 0;
  if (runFor > 0) iters = 1 << 30;
  // WORKER_TIMELINE=1: rank 0 prints each iteration's end (CLOCK_REALTIME ns) and duration, for
  // stall measurements against an injector's timestamp.
  bool timeline = getenv("WORKER_TIMELINE") && rank == 0;
  int it = 0;
  for (; it < iters; ++it) {
    std::string c = coll == "all" ? kColls[it % 6] : coll;
    auto s0 = std::chrono::steady_clock::now();
    int r = runOne(c, comm, rank, n, count, it, in, out, want);
    if (r != 0) return r;
    if (timeline) {
      timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      printf("iter %d end_ns %lld dur_us %.0f\n", it, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count() * 1e6);
    }
    if (runFor > 0) {
      int32_t stop = rank == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > runFor;
      rc = recclAllReduce(&stop, &stop, 1, recclInt32, recclMax, comm, nullptr);
      if (rc != recclSuccess) {
        fprintf(stderr, "worker rank %d iteration %d: %s: %s\n", rank, it, recclGetErrorString(rc),
                recclGetLastError(comm));
        return 10 + rc;
      }
      if (stop) {
        ++it;
        break;
      }
    }
  }
  iters = it;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  recclCommStats_t st{};
  st.size = sizeof(st);
  recclCommGetStats(comm, &st);
  printf("done rank %d iters %d secs %.2f failovers %llu failbacks %llu resent %llu dup %llu last_us %llu rails_up %u\n",
         rank, iters, secs, (unsigned long long)st.failovers, (unsigned long long)st.failbacks,
         (unsigned long long)st.bytesResent, (unsigned long long)st.duplicateSteps,
         (unsigned long long)st.lastFailoverUs, st.railsUp);
  // WORKER_RELAY_STATS=1: the relay counters too (relay_testbed_test).
  if (getenv("WORKER_RELAY_STATS"))
    printf("relay rank %d migrations %llu forwarded %llu pipes %llu\n", rank, (unsigned long long)st.relayMigrations,
           (unsigned long long)st.relayBytesForwarded, (unsigned long long)st.relayPipesServed);
  recclCommDestroy(comm);
  return 0;
}
