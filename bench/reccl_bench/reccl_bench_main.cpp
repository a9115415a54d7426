// reccl-bench: nccl-tests' all_reduce_perf & co. for reccl, one binary for every collective.
// Ranks are threads of this process (-t x -g > 1: recclCommInitAll) or, one per process, come
// from the launcher's environment (recclCommInitFromEnv). Rank 0 prints the table and writes the
// JSON files.
#include <unistd.h>

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

#include "bench_options.h"
#include "bench_report.h"
#include "bench_table.h"
#include "fault_loop.h"
#include "nccl_tests_json.h"
#include "rank_runner.h"
#include "reccl/reccl.h"

extern char** environ;

namespace reccl::bench {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 64;

// NCCL_TESTS_MIN_BW: the average bus bandwidth must reach 90 % of it; -1 when unset.
double minBusBw() {
  const char* v = std::getenv("NCCL_TESTS_MIN_BW");
  return v && *v ? std::atof(v) : -1.0;
}

int finish(const BenchOptions& o, int nranks, Report& rep, const std::vector<DeviceInfo>& devices,
           const std::string& startTime) {
  const double minBw = minBusBw();
  const std::string program = o.argv.empty() ? "reccl-bench" : o.argv[0];
  std::printf("%s", formatFooter(rep.wrongTotal, rep.avgBusBw(), minBw, program, rep.error).c_str());
  std::fflush(stdout);
  bool filesOk = true;
  int version = 0;
  recclGetVersion(&version);
  if (!o.jsonPath.empty()) {
    nlohmann::json env = environmentJson(o, nranks);
    env["reccl_version"] = version;
    filesOk = writeReportJson(o.jsonPath, "reccl-bench", env, rep);
  }
  if (!o.outputFile.empty()) {
    NcclTestsRun run;
    run.args = o.argv;
    for (char** e = environ; *e; ++e) run.env.emplace_back(*e);
    run.version = version;
    run.startTime = startTime;
    run.endTime = localTimestamp();
    run.devices = devices;
    run.rows = rep.table;
    run.outOfBounds = rep.wrongTotal;
    run.avgBusBw = rep.avgBusBw();
    run.minBusBw = minBw;
    if (!rep.error.empty()) run.errors.push_back(rep.error);
    auto path = writeExclusive(o.outputFile, ncclTestsJson(o, run).dump(2) + "\n");
    if (path.ok()) {
      std::printf("# Wrote JSON output to %s\n", path->c_str());
    } else {
      std::fprintf(stderr, "reccl-bench: -J/--output_file: %s\n", path.status().message().c_str());
      filesOk = false;
    }
  }
  if (!rep.error.empty()) std::fprintf(stderr, "reccl-bench: %s\n", rep.error.c_str());
  return rep.error.empty() && rep.wrongTotal == 0 && filesOk && busBwOk(rep.avgBusBw(), minBw) ? kExitOk : kExitFailed;
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
  const int n = o.ranksHere();
  const std::string startTime = localTimestamp();
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
  std::vector<DeviceInfo> devices;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      RankRunner runner(o, comms[size_t(r)], r, n, false, r == 0 ? &rep : nullptr);
      bool ok = runner.run();
      if (r == 0) devices = runner.devices();
      if (!ok) {
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
  return finish(o, n, rep, devices, startTime);
}

// This process's rank of a launcher's job (recclCommInitFromEnv), with its rank and the job's
// size; false (said on stderr) when that fails.
bool commFromEnv(recclComm_t* comm, int* rank, int* n) {
  if (recclResult_t r = recclCommInitFromEnv(comm); r != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: recclCommInitFromEnv failed: %s: %s\n", recclGetErrorString(r),
                 recclGetLastError(nullptr));
    return false;
  }
  if (recclCommUserRank(*comm, rank) != recclSuccess || recclCommCount(*comm, n) != recclSuccess) {
    std::fprintf(stderr, "reccl-bench: cannot read rank and size of the communicator\n");
    recclCommAbort(*comm);
    return false;
  }
  return true;
}

// --fault-plan: the plan is read and checked on every rank before anything connects, so a bad
// file is a usage error everywhere; rank 0 runs it (every rank its own with
// --fault-plan-every-rank).
int runFaultPlan(const BenchOptions& o) {
  auto plan = inject::loadPlanFile(o.faultPlanPath);
  if (!plan.ok()) {
    std::fprintf(stderr, "reccl-bench: --fault-plan: %s\n", plan.status().message().c_str());
    return kExitUsage;
  }
  // The runner's own root-namespace check compares with init's namespace, which a rank inside a
  // testbed host often cannot see (/proc/1 unreadable: it then compares with its own, the very
  // host the plan targets). The bench applies the rules that matter itself and runs the plan
  // with force: never the caller's namespace by omission, never the management NIC. A lab VM
  // (RECCL_TEST_LAB, docs/lab.md) is a host of its own whose rail NICs are in its root namespace;
  // there the management NIC is the one lab.sh names in RECCL_LAB_NIC.
  const char* labNic = std::getenv("RECCL_TEST_LAB") ? std::getenv("RECCL_LAB_NIC") : nullptr;
  for (const auto& a : plan.value().actions) {
    const bool mgmt = a.target.dev == "mgmt0" || (labNic && a.target.dev == labNic);
    if ((a.target.netns.empty() && !std::getenv("RECCL_TEST_LAB")) || mgmt) {
      std::fprintf(stderr, "reccl-bench: --fault-plan: entry %d: refusing to act on %s\n", a.source,
                   mgmt ? ("the management nic " + a.target.dev).c_str()
                        : "the root network namespace (no netns named)");
      return kExitUsage;
    }
  }
  // A background device no action targets is a misspelt one: the background device's own
  // actions would then be counted as faults.
  for (const auto& b : o.faultBackground) {
    bool targeted = false;
    for (const auto& a : plan.value().actions) targeted |= a.target.netns + "/" + a.target.dev == b;
    if (!targeted) {
      std::fprintf(stderr, "reccl-bench: --fault-background: no action of the plan targets %s\n", b.c_str());
      return kExitUsage;
    }
  }
  recclComm_t comm = nullptr;
  int rank = 0, n = 1;
  if (!commFromEnv(&comm, &rank, &n)) return kExitFailed;
  return runFaultPlanRank(o, plan.value(), comm, rank, n);
}

int runProcess(const BenchOptions& o) {
  const std::string startTime = localTimestamp();
  recclComm_t comm = nullptr;
  int rank = 0, n = 1;
  if (!commFromEnv(&comm, &rank, &n)) return kExitFailed;
  if (int rc = rootCheck(o, n)) {
    recclCommDestroy(comm);
    return rc;
  }
  Report rep;
  RankRunner runner(o, comm, rank, n, true, rank == 0 ? &rep : nullptr);
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
  return finish(o, n, rep, runner.devices(), startTime);
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
  for (const std::string& note : o.notes) std::fprintf(stderr, "reccl-bench: %s\n", note.c_str());
  // -T: how long a call may make no progress, unless the environment says already.
  if (o.timeoutSec > 0 && !std::getenv("RECCL_TIMEOUT_MS"))
    setenv("RECCL_TIMEOUT_MS", std::to_string(int64_t(o.timeoutSec) * 1000).c_str(), 1);
  const int world = launcherWorldSize([](const char* n) -> const char* { return std::getenv(n); });
  if (!o.faultPlanPath.empty()) return runFaultPlan(o);
  if (world > 1 && o.ranksHere() > 1) {
    std::fprintf(stderr,
                 "reccl-bench: -t/-g: %d ranks per process under a launcher of %d processes is not supported: "
                 "run one rank per process (-t 1 -g 1), or threads without a launcher\n",
                 o.ranksHere(), world);
    return kExitUsage;
  }
  // One rank here and a launcher: its environment has the ranks; else the ranks are threads.
  return world > 0 && o.ranksHere() == 1 ? runProcess(o) : runThreads(o);
}
