// reccl-bench: nccl-tests' all_reduce_perf & co. for reccl, one binary for every collective.
// Ranks come from the launcher's environment (recclCommInitFromEnv) or, with -t N, are N threads
// of this process (recclCommInitAll). Rank 0 prints the table and writes the JSON.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_data.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_table.h"
#include "fault_loop.h"
#include "reccl/reccl.h"
#include "reduce/reduce.h"
#include "source_wait.h"

namespace reccl::bench {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 64;

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;

Buffer allocBuffer(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64 + 64;
  return Buffer(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
}

class RankRunner {
 public:
  RankRunner(const BenchOptions& o, recclComm_t comm, int rank, int nranks, Report* report)
      : o_(o), comm_(comm), rank_(rank), nranks_(nranks), report_(report) {}

  // false when a call failed; the message is in error().
  bool run() {
    const int64_t maxBytes = o_.maxBytes;
    send_ = allocBuffer(size_t(maxBytes));
    recv_ = allocBuffer(size_t(maxBytes));
    if (!send_ || !recv_) return fail("cannot allocate two buffers of " + std::to_string(maxBytes) + " bytes");
    const SourceWait sw = waitFaultSourceReady(comm_);
    if (report_) {
      std::printf("%s", formatSourceLine(sw).c_str());
      std::printf("%s", formatRunLine(nranks_, o_.threads, o_.minBytes, o_.maxBytes, o_.stepFactor, o_.stepBytes,
                                      o_.warmupIters, o_.iters, o_.check).c_str());
      std::printf("# reduction kernels: %s\n", reduce::isaName());
    }
    for (Coll c : o_.colls) {
      if (report_) std::printf("#\n# Collective: %s\n%s", collName(c), formatColumnHeader().c_str());
      std::fflush(stdout);
      for (recclDataType_t t : o_.types) {
        std::vector<recclRedOp_t> ops = collReduces(c) ? o_.ops : std::vector<recclRedOp_t>{recclSum};
        for (recclRedOp_t op : ops) {
          std::vector<int> roots{-1};
          if (collHasRoot(c)) {
            roots.clear();
            if (o_.root < 0)
              for (int r = 0; r < nranks_; ++r) roots.push_back(r);
            else
              roots.push_back(o_.root);
          }
          for (int root : roots)
            for (int64_t bytes : sizeList(o_))
              if (!runRow(c, t, op, root, bytes)) return false;
        }
      }
    }
    return true;
  }

  const std::string& error() const { return error_; }
  // Wrong elements over all ranks and rows (every rank knows it: the counts are allreduced).
  int64_t wrongTotal() const { return wrongTotal_; }

 private:
  bool fail(std::string msg) {
    error_ = "rank " + std::to_string(rank_) + ": " + msg;
    return false;
  }
  bool callFailed(const char* what, recclResult_t r) {
    const char* detail = recclGetLastError(comm_);
    return fail(std::string(what) + " failed: " + recclGetErrorString(r) + (detail && *detail ? ": " : "") +
                (detail ? detail : ""));
  }

  recclResult_t issue(Coll c, const void* send, void* recv, const Shape& s, recclDataType_t t, recclRedOp_t op,
                      int root) {
    switch (c) {
      case Coll::kAllReduce: return recclAllReduce(send, recv, s.paramCount, t, op, comm_, nullptr);
      case Coll::kAllGather: return recclAllGather(send, recv, s.paramCount, t, comm_, nullptr);
      case Coll::kReduceScatter: return recclReduceScatter(send, recv, s.paramCount, t, op, comm_, nullptr);
      case Coll::kBroadcast: return recclBroadcast(send, recv, s.paramCount, t, root, comm_, nullptr);
      case Coll::kReduce: return recclReduce(send, recv, s.paramCount, t, op, root, comm_, nullptr);
      case Coll::kAllToAll: return recclAllToAll(send, recv, s.paramCount, t, comm_, nullptr);
      case Coll::kSendRecv: {
        recclResult_t r = recclGroupStart();
        if (r != recclSuccess) return r;
        recclResult_t rs = recclSend(send, s.paramCount, t, (rank_ + 1) % nranks_, comm_, nullptr);
        recclResult_t rr = recclRecv(recv, s.paramCount, t, (rank_ - 1 + nranks_) % nranks_, comm_, nullptr);
        r = recclGroupEnd();
        return rs != recclSuccess ? rs : rr != recclSuccess ? rr : r;
      }
    }
    return recclInvalidArgument;
  }

  // Points send/recv at the row's buffers and fills the input (and poisons the output).
  void prepare(Coll c, const DataSpec& d, const Shape& s, bool inPlace, const void** send, void** recv) {
    const size_t es = reduce::typeSize(d.type);
    unsigned char* sb = send_.get();
    unsigned char* rb = recv_.get();
    if (!inPlace) {
      std::memset(rb, 0xA5, s.recvCount * es);
      fillInput(d, rank_, s, sb);
      *send = sb;
      *recv = rb;
      return;
    }
    if (c == Coll::kAllGather) {  // my contribution already sits at my slot of the output
      std::memset(rb, 0xA5, s.recvCount * es);
      fillInput(d, rank_, s, rb + s.inPlaceSendOffset * es);
      *send = rb + s.inPlaceSendOffset * es;
      *recv = rb;
    } else {  // one buffer; reducescatter's output is my slot of the input
      fillInput(d, rank_, s, rb);
      *send = rb;
      *recv = rb + s.inPlaceRecvOffset * es;
    }
  }

  bool timeOne(Coll c, const DataSpec& d, const Shape& s, bool inPlace, Timing* out) {
    const void* send;
    void* recv;
    prepare(c, d, s, inPlace, &send, &recv);
    if (recclResult_t r = recclBarrier(comm_, nullptr); r != recclSuccess) return callFailed("recclBarrier", r);
    for (int i = 0; i < o_.warmupIters; ++i)
      if (recclResult_t r = issue(c, send, recv, s, d.type, d.op, d.root); r != recclSuccess)
        return callFailed(collName(c), r);
    if (recclResult_t r = recclBarrier(comm_, nullptr); r != recclSuccess) return callFailed("recclBarrier", r);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i)
      if (recclResult_t r = issue(c, send, recv, s, d.type, d.op, d.root); r != recclSuccess)
        return callFailed(collName(c), r);
    auto t1 = std::chrono::steady_clock::now();
    // The slowest rank's average, agreed through the library itself (as nccl-tests does).
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / o_.iters;
    if (recclResult_t r = recclAllReduce(&us, &us, 1, recclFloat64, recclMax, comm_, nullptr); r != recclSuccess)
      return callFailed("recclAllReduce(time)", r);
    int64_t wrong = -1;
    if (o_.check) {
      prepare(c, d, s, inPlace, &send, &recv);
      // Every rank's output is poisoned and its input refilled before anyone starts.
      if (recclResult_t r = recclBarrier(comm_, nullptr); r != recclSuccess) return callFailed("recclBarrier", r);
      if (recclResult_t r = issue(c, send, recv, s, d.type, d.op, d.root); r != recclSuccess)
        return callFailed(collName(c), r);
      size_t first = 0;
      uint64_t mine = countWrong(d, rank_, s, recv, &first);
      if (mine)
        std::fprintf(stderr, "reccl-bench: rank %d: %s %s %s %s count %zu: %" PRIu64 " wrong, first at %zu\n", rank_,
                     collName(c), inPlace ? "in-place" : "out-of-place", reduce::typeName(d.type),
                     reduce::opName(d.op), s.count, mine, first);
      if (recclResult_t r = recclAllReduce(&mine, &mine, 1, recclUint64, recclSum, comm_, nullptr); r != recclSuccess)
        return callFailed("recclAllReduce(wrong count)", r);
      wrong = int64_t(mine);
      wrongTotal_ += wrong;
    }
    *out = makeTiming(c, int64_t(s.count * reduce::typeSize(d.type)), us, nranks_, wrong);
    return true;
  }

  bool runRow(Coll c, recclDataType_t t, recclRedOp_t op, int root, int64_t bytes) {
    const size_t es = reduce::typeSize(t);
    Shape s = shapeFor(c, size_t(bytes) / es, nranks_, rank_);
    DataSpec d{c, t, op, nranks_, root < 0 ? 0 : root};
    Row row;
    row.coll = c;
    row.count = s.count;
    row.bytes = int64_t(s.count * es);
    row.type = t;
    if (collReduces(c)) row.op = op;
    row.root = root;
    Timing oop;
    if (!timeOne(c, d, s, false, &oop)) return false;
    row.outOfPlace = oop;
    if (collHasInPlace(c)) {
      Timing ip;
      if (!timeOne(c, d, s, true, &ip)) return false;
      row.inPlace = ip;
    }
    if (report_) {
      std::printf("%s", formatRow(row).c_str());
      std::fflush(stdout);
      report_->add(row);
    }
    return true;
  }

  const BenchOptions& o_;
  recclComm_t comm_;
  int rank_, nranks_;
  Report* report_;
  Buffer send_, recv_;
  std::string error_;
  int64_t wrongTotal_ = 0;
};

int finish(const BenchOptions& o, int nranks, Report& rep) {
  if (rep.error.empty()) std::printf("%s", formatFooter(rep.wrongTotal, rep.avgBusBw()).c_str());
  std::fflush(stdout);
  bool jsonOk = true;
  if (!o.jsonPath.empty()) {
    nlohmann::json env = environmentJson(o, nranks);
    int version = 0;
    if (recclGetVersion(&version) == recclSuccess) env["reccl_version"] = version;
    jsonOk = writeReportJson(o.jsonPath, "reccl-bench", env, rep);
  }
  if (!rep.error.empty()) std::fprintf(stderr, "reccl-bench: %s\n", rep.error.c_str());
  return rep.error.empty() && rep.wrongTotal == 0 && jsonOk ? kExitOk : kExitFailed;
}

int rootCheck(const BenchOptions& o, int nranks) {
  for (Coll c : o.colls)
    if (collHasRoot(c) && o.root >= nranks) {
      std::fprintf(stderr, "reccl-bench: -r/--root: %d is not a rank (%d ranks)\n", o.root, nranks);
      return kExitUsage;
    }
  return kExitOk;
}

int runThreads(const BenchOptions& o) {
  const int n = o.threads;
  std::vector<recclComm_t> comms(size_t(n), nullptr);
  if (recclResult_t r = recclCommInitAll(comms.data(), n, nullptr); r != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: recclCommInitAll(%d) failed: %s: %s\n", n, recclGetErrorString(r),
                 recclGetLastError(nullptr));
    return kExitFailed;
  }
  if (int rc = rootCheck(o, n)) {
    for (recclComm_t c : comms) recclCommDestroy(c);
    return rc;
  }
  Report rep;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      RankRunner runner(o, comms[size_t(r)], r, n, r == 0 ? &rep : nullptr);
      if (!runner.run()) {
        {
          std::lock_guard lk(mu);
          if (rep.error.empty()) rep.error = runner.error();
        }
        // Peers blocked in a collective with this rank fail fast instead of waiting out a timeout.
        recclCommAbort(comms[size_t(r)]);
        comms[size_t(r)] = nullptr;
      }
    });
  for (auto& t : threads) t.join();
  for (recclComm_t c : comms)
    if (c) recclCommDestroy(c);
  return finish(o, n, rep);
}

// --fault-plan: the plan is read and checked on every rank before anything connects, so a bad
// file is a usage error everywhere; only rank 0 runs it.
int runFaultPlan(const BenchOptions& o) {
  auto plan = inject::loadPlanFile(o.faultPlanPath);
  if (!plan.ok()) {
    std::fprintf(stderr, "reccl-bench: --fault-plan: %s\n", plan.status().message().c_str());
    return kExitUsage;
  }
  // The runner's own root-namespace check compares with init's namespace, which a rank inside a
  // testbed host often cannot see (/proc/1 unreadable: it then compares with its own, the very
  // host the plan targets). The bench applies the rules that matter itself and runs the plan
  // with force: never the caller's namespace by omission, never the management NIC.
  for (const auto& a : plan.value().actions) {
    if (a.target.netns.empty() || a.target.dev == "mgmt0") {
      std::fprintf(stderr, "reccl-bench: --fault-plan: entry %d: refusing to act on %s\n", a.source,
                   a.target.netns.empty() ? "the root network namespace (no netns named)" : "the management nic mgmt0");
      return kExitUsage;
    }
  }
  recclComm_t comm = nullptr;
  if (recclResult_t r = recclCommInitFromEnv(&comm); r != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: recclCommInitFromEnv failed: %s: %s\n", recclGetErrorString(r),
                 recclGetLastError(nullptr));
    return kExitFailed;
  }
  int rank = 0, n = 1;
  if (recclCommUserRank(comm, &rank) != recclSuccess || recclCommCount(comm, &n) != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: cannot read rank and size of the communicator\n");
    recclCommAbort(comm);
    return kExitFailed;
  }
  return runFaultPlanRank(o, plan.value(), comm, rank, n);
}

int runProcess(const BenchOptions& o) {
  recclComm_t comm = nullptr;
  if (recclResult_t r = recclCommInitFromEnv(&comm); r != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: recclCommInitFromEnv failed: %s: %s\n", recclGetErrorString(r),
                 recclGetLastError(nullptr));
    return kExitFailed;
  }
  int rank = 0, n = 1;
  if (recclCommUserRank(comm, &rank) != recclSuccess || recclCommCount(comm, &n) != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: cannot read rank and size of the communicator\n");
    recclCommAbort(comm);
    return kExitFailed;
  }
  if (int rc = rootCheck(o, n)) {
    recclCommDestroy(comm);
    return rc;
  }
  Report rep;
  RankRunner runner(o, comm, rank, n, rank == 0 ? &rep : nullptr);
  bool ok = runner.run();
  if (!ok) {
    rep.error = runner.error();
    recclCommAbort(comm);
  } else {
    recclCommDestroy(comm);
  }
  if (rank != 0) {  // exits like rank 0, so any launcher sees the failure
    if (!ok) std::fprintf(stderr, "reccl-bench: %s\n", rep.error.c_str());
    return ok && runner.wrongTotal() == 0 ? kExitOk : kExitFailed;
  }
  return finish(o, n, rep);
}

}  // namespace
}  // namespace reccl::bench

int main(int argc, char** argv) {
  using namespace reccl::bench;
  auto parsed = parseOptions(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "reccl-bench: %s (try --help)\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  const BenchOptions& o = parsed.value();
  if (o.help) {
    std::printf("%s", o.helpText.c_str());
    return kExitOk;
  }
  if (!o.faultPlanPath.empty()) return runFaultPlan(o);
  return o.threads > 0 ? runThreads(o) : runProcess(o);
}
