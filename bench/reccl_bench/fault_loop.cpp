#include "fault_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_data.h"
#include "bench_report.h"
#include "call_op.h"
#include "collective.h"
#include "fault_timeline.h"
#include "reccl/inject/plan_runner.h"
#include "reduce/reduce.h"
#include "source_wait.h"

namespace reccl::bench {
namespace {

using nlohmann::json;

constexpr int kExitOk = 0, kExitFailed = 1;
constexpr long long kSlowEndMs = 5000;  // an end step this long is named on stderr

int64_t monoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// SIGINT/SIGTERM/SIGHUP: stop the loop and let the plan undo its faults before exiting.
std::atomic<bool> gInterrupted{false};
std::atomic<int> gStopFd{-1};
extern "C" void onStopSignal(int) {
  gInterrupted.store(true);
  int fd = gStopFd.load();
  uint64_t one = 1;
  if (fd >= 0) {
    ssize_t n = ::write(fd, &one, sizeof one);
    (void)n;
  }
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<unsigned char, FreeDeleter>;
Buffer alloc(size_t bytes) {
  return Buffer(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64)));
}

bool isFault(inject::ActionKind k) {
  using K = inject::ActionKind;
  return k == K::kLinkDown || k == K::kCarrierOff || k == K::kDrop || k == K::kBlackhole;
}
bool isRepair(inject::ActionKind k) {
  using K = inject::ActionKind;
  return k == K::kLinkUp || k == K::kCarrierOn || k == K::kClear;
}

// Fault moments (ActionRecord::effectNs) and their recoveries (the undo of the same entry, or a
// later link-up / carrier-on / clear of the same target). Actions on a `background` device
// (NETNS/DEV) are not faults.
std::vector<FaultMoment> faultMoments(const inject::FaultPlan& plan, const inject::PlanRunResult& r,
                                      const std::vector<std::string>& background) {
  auto targetOf = [&](const inject::ActionRecord& rec) -> const inject::Target* {
    for (const auto& a : plan.actions)
      if (a.source == rec.source && a.kind == rec.kind) return &a.target;
    return nullptr;
  };
  std::vector<FaultMoment> out;
  for (size_t i = 0; i < r.records.size(); ++i) {
    const auto& rec = r.records[i];
    if (rec.undo || !isFault(rec.kind)) continue;
    const inject::Target* t = targetOf(rec);
    if (t && std::find(background.begin(), background.end(), t->netns + "/" + t->dev) != background.end()) continue;
    FaultMoment m;
    m.faultNs = rec.effectNs;
    m.action = inject::actionName(rec.kind);
    m.target = t ? t->toString() : "?";
    for (size_t k = i + 1; k < r.records.size(); ++k) {
      const auto& u = r.records[k];
      const inject::Target* ut = targetOf(u);
      bool same = ut && t && ut->netns == t->netns && ut->dev == t->dev && ut->side == t->side;
      if ((u.undo && u.source == rec.source && u.kind == rec.kind) || (!u.undo && isRepair(u.kind) && same)) {
        m.recoverNs = u.effectNs;
        break;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// Every action applied and undone, the devices restored, not stopped early.
bool planCompleted(const inject::PlanRunResult& pr) { return pr.failed == 0 && pr.restoreStatus.ok() && !pr.stopped; }

std::string fmt(const json& v, const char* f = "%.2f") {
  if (!v.is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, f, v.get<double>());
  return b;
}

}  // namespace

int runFaultPlanRank(const BenchOptions& o, const inject::FaultPlan& plan, recclComm_t comm, int rank, int nranks) {
  const recclDataType_t type = o.types[0];
  const recclRedOp_t op = o.ops[0];
  const size_t es = reduce::typeSize(type);
  const size_t count = size_t(o.maxBytes) / es;
  const size_t bytes = count * es;
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "reccl-bench: rank %d: %s\n", rank, msg.c_str());
    recclCommAbort(comm);
    return kExitFailed;
  };
  if (count == 0) return fail("-e/--maxbytes: --fault-plan needs at least one element");

  // Two inputs in one buffer: even iterations send elements [0, count), odd ones [1, count + 1),
  // so a step lost in iteration k leaves iteration k-1's (different) value behind and the
  // check sees it without poisoning 64 MiB per iteration.
  DataSpec d{Coll::kAllReduce, type, op, nranks, 0};
  Shape s1 = shapeFor(Coll::kAllReduce, count + 1, nranks, rank);
  Buffer in = alloc((count + 1) * es), want = alloc((count + 1) * es), out = alloc(bytes);
  if (!in || !want || !out) return fail("cannot allocate buffers of " + std::to_string(bytes) + " bytes");
  fillInput(d, rank, s1, in.get());
  for (size_t i = 0; i <= count; ++i) expectedElement(d, rank, s1, i, want.get() + i * es);
  const double factor = busBwFactor(Coll::kAllReduce, nranks);

  std::string error;
  auto callFailed = [&](const char* what, recclResult_t r) {
    const char* detail = recclGetLastError(comm);
    error = "rank " + std::to_string(rank) + ": " + what + " failed: " + recclGetErrorString(r) +
            (detail && *detail ? std::string(": ") + detail : std::string());
  };
  // The loop's op (a mulsum's made on the communicator); the expected data use `op`.
  RedOp loopOp;
  if (recclResult_t r = callOp(op, type, rank, comm, &loopOp); r != recclSuccess) {
    callFailed("recclRedOpCreatePreMulSum", r);
    return fail(error);
  }
  uint64_t wrongLocal = 0;
  auto iterate = [&](int it, int64_t* t0, int64_t* t1) -> bool {
    const size_t par = size_t(it & 1);
    *t0 = monoNs();
    recclResult_t r = recclAllReduce(in.get() + par * es, out.get(), count, type, loopOp.get(), comm, nullptr);
    *t1 = monoNs();
    if (r != recclSuccess) {
      callFailed("recclAllReduce", r);
      return false;
    }
    const unsigned char* w = want.get() + par * es;
    if (std::memcmp(out.get(), w, bytes) != 0) {
      uint64_t wrong = 0;
      size_t first = count;
      for (size_t i = 0; i < count; ++i)
        if (std::memcmp(out.get() + i * es, w + i * es, es) != 0) {
          if (!wrong) first = i;
          ++wrong;
        }
      std::fprintf(stderr, "reccl-bench: rank %d: iteration %d: %llu wrong elements, first at %zu\n", rank, it,
                   static_cast<unsigned long long>(wrong), first);
      wrongLocal += wrong;
    }
    return true;
  };

  // The detector up before the plan's clock starts, so every fault meets the same source.
  const SourceWait sw = waitFaultSourceReady(comm);
  if (rank == 0) std::fprintf(stderr, "%s", formatSourceLine(sw).c_str());
  for (int i = 0; i < o.warmupIters; ++i) {
    int64_t a, b;
    if (!iterate(i, &a, &b)) return fail(error);
  }
  if (recclResult_t r = recclBarrier(comm, nullptr); r != recclSuccess) {
    callFailed("recclBarrier", r);
    return fail(error);
  }

  // Rank 0 (every rank with --fault-plan-every-rank): the plan on its own thread, timed from here.
  const bool runsPlan = rank == 0 || o.faultPlanEveryRank;
  int stopFd = -1;
  std::thread planThread;
  std::atomic<bool> planDone{false};
  std::atomic<int64_t> planDoneNs{0};
  std::optional<Result<inject::PlanRunResult>> planResult;
  struct sigaction oldInt {}, oldTerm{}, oldHup{};
  const int64_t t0 = monoNs();
  if (runsPlan) {
    stopFd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stopFd < 0) return fail(std::string("eventfd: ") + std::strerror(errno));
    gStopFd.store(stopFd);
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);
    sigaction(SIGHUP, &sa, &oldHup);
    planThread = std::thread([&] {
      inject::PlanRunOptions po;
      po.logPath = o.faultLogPath;
      po.stopFd = stopFd;
      po.force = true;  // targets checked by the caller (reccl_bench_main.cpp: runFaultPlan)
      po.holdTapQueues = o.faultHoldTapQueues;
      planResult.emplace(inject::runPlan(plan, po));
      planDoneNs.store(monoNs());
      planDone.store(true);
    });
  }

  std::vector<IterationSample> samples;
  bool ok = true;
  for (int it = 0;; ++it) {
    IterationSample s;
    if (!iterate(it, &s.startNs, &s.endNs)) {
      ok = false;
      break;
    }
    double sec = double(s.endNs - s.startNs) / 1e9;
    s.busBw = sec > 0 ? double(bytes) / sec / 1e9 * factor : 0;
    recclCommStats_t st{};
    st.size = sizeof st;
    recclCommGetStats(comm, &st);
    // Rank 0's stop decision (kept back while any rank's plan or its tail still runs), anyone's
    // wrong result or interrupt, and the failover counters, agreed at once.
    const bool tailDone =
        !runsPlan || (planDone.load() && monoNs() >= planDoneNs.load() + o.faultTailMs * 1000000);
    uint64_t stop = 0;
    if (rank == 0 && tailDone && it + 1 >= o.iters) stop = 1;
    if (gInterrupted.load()) stop = 2;
    uint64_t commit = st.lastFailoverSignalNs ? st.lastFailoverSignalNs + st.lastFailoverUs * 1000 : 0;
    // The fault-move stamps: a call that spans a fault, its failover and the fail-back leaves the
    // failover's (the latest migration's would be the fail-back's). As ages: the hosts' clocks
    // differ (stampAsAge).
    const auto now = static_cast<uint64_t>(monoNs());
    uint64_t agree[9] = {stop,
                         wrongLocal ? 1u : 0u,
                         stampAsAge(st.lastFaultMoveFirstStepNs, now),
                         stampAsAge(st.lastFailoverSignalNs, now),
                         st.failovers,
                         st.failbacks,
                         stampAsAge(commit, now),
                         stampAsAge(st.lastFaultMoveResumeNs, now),
                         tailDone ? 0u : 1u};
    if (recclResult_t r = recclAllReduce(agree, agree, 9, recclUint64, recclMax, comm, nullptr); r != recclSuccess) {
      callFailed("recclAllReduce(agree)", r);
      ok = false;
      break;
    }
    s.statsNs = monoNs();
    s.firstStepNs = stampFromAge(agree[2], now);
    s.signalNs = stampFromAge(agree[3], now);
    s.failovers = agree[4];
    s.failbacks = agree[5];
    s.commitNs = stampFromAge(agree[6], now);
    s.resumeNs = stampFromAge(agree[7], now);
    samples.push_back(s);
    if (agree[1]) {
      error = "wrong results (see the ranks' messages)";
      break;
    }
    if (agree[0] == 2) {
      error = "interrupted";
      break;
    }
    if (agree[0] == 1 && agree[8] == 0) break;
  }

  // Totals over ranks; a failed communicator cannot sum them (rank 0 reports its own).
  recclCommStats_t st{};
  st.size = sizeof st;
  recclCommGetStats(comm, &st);
  uint64_t totals[5] = {wrongLocal, st.failovers, st.failbacks, st.bytesResent, st.duplicateSteps};
  // The end's steps are timed: one that takes seconds (a guest NIC that stopped sending) says
  // which it was.
  auto slowStep = [rank](const char* what, int64_t sinceNs) {
    const long long ms = (monoNs() - sinceNs) / 1'000'000;
    if (ms >= kSlowEndMs) std::fprintf(stderr, "reccl-bench: rank %d: %s took %lld ms\n", rank, what, ms);
  };
  int64_t stepNs = monoNs();
  if (ok && recclAllReduce(totals, totals, 5, recclUint64, recclSum, comm, nullptr) != recclSuccess) ok = false;
  slowStep("the totals' allreduce", stepNs);
  stepNs = monoNs();
  if (ok)
    recclCommDestroy(comm);
  else
    recclCommAbort(comm);
  slowStep(ok ? "recclCommDestroy" : "recclCommAbort", stepNs);

  if (runsPlan) {
    if (!planDone.load()) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(stopFd, &one, sizeof one);
    }
    stepNs = monoNs();
    planThread.join();
    slowStep("the fault plan's end", stepNs);
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
    gStopFd.store(-1);
    ::close(stopFd);
  }
  if (rank != 0) {
    // A rank's own plan (--fault-plan-every-rank): its faults counted, each applied and undone.
    bool planGood = true;
    if (runsPlan) {
      if (planResult && planResult->ok()) {
        const auto& pr = planResult->value();
        planGood = planCompleted(pr);
        std::printf("# fault plan %s on rank %d: %zu faults, %s\n", o.faultPlanPath.c_str(), rank,
                    faultMoments(plan, pr, o.faultBackground).size(),
                    planGood ? "every action applied and undone"
                    : pr.failed       ? "an action failed (see --fault-log)"
                    : pr.stopped      ? "stopped before its end"
                                      : ("restoring its devices failed: " + pr.restoreStatus.ToString()).c_str());
        std::fflush(stdout);
      } else {
        planGood = false;
        std::fprintf(stderr, "reccl-bench: rank %d: --fault-plan: %s\n", rank,
                     planResult ? planResult->status().ToString().c_str() : "did not run");
      }
    }
    if (!error.empty()) std::fprintf(stderr, "reccl-bench: %s\n", error.c_str());
    return ok && totals[0] == 0 && planGood ? kExitOk : kExitFailed;
  }

  json planJson;
  std::vector<FaultMoment> moments;
  bool planOk = false;
  if (planResult && planResult->ok()) {
    const auto& pr = planResult->value();
    moments = faultMoments(plan, pr, o.faultBackground);
    planOk = planCompleted(pr);
    json recs = json::array();
    for (const auto& r : pr.records)
      recs.push_back({{"seq", r.seq}, {"source", r.source}, {"action", inject::actionName(r.kind)}, {"undo", r.undo},
                      {"at_ms", r.atMs}, {"scheduled_mono_ns", r.scheduledNs}, {"start_mono_ns", r.startNs},
                      {"done_mono_ns", r.doneNs}, {"effect_mono_ns", r.effectNs}, {"ok", r.status.ok()},
                      {"error", r.status.ok() ? std::string() : r.status.ToString()}});
    planJson = {{"path", o.faultPlanPath}, {"t0_mono_ns", pr.t0MonoNs}, {"sched", pr.schedPolicy},
                {"stopped", pr.stopped}, {"failed", pr.failed}, {"restore_ok", pr.restoreStatus.ok()},
                {"late_p50_ns", pr.lateP50Ns}, {"late_p99_ns", pr.lateP99Ns}, {"late_max_ns", pr.lateMaxNs},
                {"records", recs}};
    if (pr.failed && error.empty()) error = "a fault action failed (see --fault-log)";
    if (!pr.restoreStatus.ok() && error.empty()) error = "restoring the plan's devices failed: " + pr.restoreStatus.ToString();
  } else {
    std::string why = planResult ? planResult->status().ToString() : "did not run";
    planJson = {{"path", o.faultPlanPath}, {"error", why}};
    if (error.empty()) error = "--fault-plan: " + why;
  }

  json analysis = analyzeFaults(samples, moments, t0);
  const json& sum = analysis["summary"];
  std::printf("# fault plan %s: %zu iterations of allreduce %zu bytes (%s %s), %zu faults\n", o.faultPlanPath.c_str(),
              samples.size(), bytes, reduce::typeName(type), opName(op), moments.size());
  // Other hosts' fault times are on their own clocks: they cannot be placed on this timeline.
  if (o.faultPlanEveryRank)
    std::printf("# the other ranks' faults (--fault-plan-every-rank) are not analysed here: a fault's stall below "
                "may take in theirs\n");
  for (const auto& f : analysis["faults"])
    std::printf("#  fault %d at %.3f s %s %s: stall %s ms (first step %s, signal %s, switch %s) busbw before %s "
                "during %s degraded %s after %s GB/s\n",
                f["index"].get<int>(), f["at_s"].get<double>(), f["action"].get<std::string>().c_str(),
                f["target"].get<std::string>().c_str(), fmt(f["stall_ms"]).c_str(), fmt(f["first_step_ms"]).c_str(),
                fmt(f["signal_after_fault_ms"]).c_str(), fmt(f["fault_to_switch_ms"]).c_str(),
                fmt(f["busbw_before_gbps"], "%.3f").c_str(), fmt(f["busbw_during_gbps"], "%.3f").c_str(),
                fmt(f["busbw_degraded_gbps"], "%.3f").c_str(), fmt(f["busbw_after_gbps"], "%.3f").c_str());
  std::printf("# stall ms p50 %s p99 %s max %s (first step p50 %s p99 %s) over %d faults with a failover; busbw "
              "GB/s before %s during %s degraded %s after %s\n",
              fmt(sum["stall_ms"]["p50"]).c_str(), fmt(sum["stall_ms"]["p99"]).c_str(),
              fmt(sum["stall_ms"]["max"]).c_str(), fmt(sum["first_step_ms"]["p50"]).c_str(),
              fmt(sum["first_step_ms"]["p99"]).c_str(), sum["faults_with_failover"].get<int>(),
              fmt(sum["busbw_gbps"]["before"], "%.3f").c_str(), fmt(sum["busbw_gbps"]["during"], "%.3f").c_str(),
              fmt(sum["busbw_gbps"]["degraded"], "%.3f").c_str(), fmt(sum["busbw_gbps"]["after"], "%.3f").c_str());
  std::printf("# failovers %llu failbacks %llu bytes resent %llu duplicate steps %llu (sums over ranks)\n",
              static_cast<unsigned long long>(totals[1]), static_cast<unsigned long long>(totals[2]),
              static_cast<unsigned long long>(totals[3]), static_cast<unsigned long long>(totals[4]));
  std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(totals[0]),
              totals[0] == 0 && ok ? "OK" : "FAILED");
  std::fflush(stdout);

  bool good = ok && error.empty() && totals[0] == 0 && planOk;
  bool jsonOk = true;
  if (!o.jsonPath.empty()) {
    json j;
    j["tool"] = "reccl-bench";
    j["mode"] = "fault-plan";
    json env = environmentJson(o, nranks);
    int version = 0;
    if (recclGetVersion(&version) == recclSuccess) env["reccl_version"] = version;
    j["environment"] = env;
    j["collective"] = {{"coll", "allreduce"}, {"bytes", bytes}, {"count", count}, {"type", reduce::typeName(type)},
                       {"op", opName(op)}, {"busbw_factor", factor}};
    j["t0_mono_ns"] = t0;
    j["plan"] = planJson;
    json iters = json::array();
    for (const auto& s : samples)
      iters.push_back({{"start_mono_ns", s.startNs}, {"end_mono_ns", s.endNs}, {"busbw_gbps", s.busBw},
                       {"stats_mono_ns", s.statsNs}, {"failovers", s.failovers}, {"failbacks", s.failbacks},
                       {"first_step_mono_ns", s.firstStepNs}, {"signal_mono_ns", s.signalNs},
                       {"commit_mono_ns", s.commitNs}, {"resume_mono_ns", s.resumeNs}});
    j["iterations"] = iters;
    // The fault source rank 0's monitor used at the end of the run (recclCommStats_t).
    j["fault_source"] = {{"kind", recclGetFaultSourceString(static_cast<recclFaultSource_t>(st.faultSource))},
                         {"name", st.faultSourceName}};
    j["faults"] = analysis["faults"];
    j["summary"] = sum;
    j["counters"] = {{"failovers", totals[1]}, {"failbacks", totals[2]}, {"bytes_resent", totals[3]},
                     {"duplicate_steps", totals[4]}, {"summed_over_ranks", ok}};
    j["out_of_bounds"] = totals[0];
    j["status"] = good ? "ok" : "failed";
    if (!error.empty()) j["error"] = error;
    std::ofstream f(o.jsonPath);
    if (f) f << j.dump(1) << "\n";
    f.close();
    if (!f) {
      std::fprintf(stderr, "reccl-bench: --json: cannot write %s: %s\n", o.jsonPath.c_str(), std::strerror(errno));
      jsonOk = false;
    }
  }
  if (!error.empty()) std::fprintf(stderr, "reccl-bench: %s\n", error.c_str());
  return good && jsonOk ? kExitOk : kExitFailed;
}

}  // namespace reccl::bench
