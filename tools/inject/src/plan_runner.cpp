#include "reccl/inject/plan_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "reccl/common/log.h"
#include "reccl/inject/fault_session.h"
#include "reccl/inject/lab_cable.h"
#include "reccl/inject/precise_wait.h"

namespace reccl::inject {

namespace {

using nlohmann::json;

struct Event {
  int64_t atMs = 0;
  bool undo = false;
  size_t action = 0;  // index into plan.actions
};

struct FileCloser {
  void operator()(FILE* f) const noexcept { std::fclose(f); }
};

class JsonLog {
 public:
  Status open(const std::string& path) {
    if (path.empty()) return {};
    f_.reset(std::fopen(path.c_str(), "w"));
    if (!f_) return Status::FromErrno(errno, "open log " + path);
    path_ = path;
    return {};
  }
  // Flushed per line: a benchmark may tail the log while the plan runs. A failed write (a full
  // disk) does not stop the plan, whose faults keep their schedule; it is kept and reported.
  void write(const json& j) {
    if (!f_) return;
    std::string line = j.dump();
    line += '\n';
    if ((std::fwrite(line.data(), 1, line.size(), f_.get()) != line.size() || std::fflush(f_.get()) != 0) &&
        status_.ok())
      status_ = Status::FromErrno(errno, "write log " + path_);
  }
  const Status& status() const { return status_; }

 private:
  std::unique_ptr<FILE, FileCloser> f_;
  std::string path_;
  Status status_;
};

}  // namespace

int64_t percentileNs(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  if (rank == 0) rank = 1;
  return v[std::min(rank, v.size()) - 1];
}

Result<PlanRunResult> runPlan(const FaultPlan& plan, const PlanRunOptions& opts) {
  if (plan.actions.empty()) return Status{Errc::kInvalidArgument, "plan has no actions"};
  JsonLog log;
  FaultSession session(opts.force, opts.holdTapQueues);
  RECCL_TRY(session.prepare(plan.actions));
  RECCL_TRY(log.open(opts.logPath));

  std::vector<Event> events;
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    events.push_back({plan.actions[i].atMs, false, i});
    if (plan.actions[i].durationMs > 0)
      events.push_back({plan.actions[i].atMs + plan.actions[i].durationMs, true, i});
  }
  // Same millisecond: undos first (a fault that ends where the next begins), then file order.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.atMs != b.atMs) return a.atMs < b.atMs;
    return a.undo && !b.undo;
  });

  PlanRunResult res;
  std::vector<std::optional<AppliedFault>> applied(plan.actions.size());
  {
    TimingPriority prio(opts.realtime);
    res.schedPolicy = prio.policyName();
    res.t0MonoNs = monotonicNs() + opts.leadMs * 1'000'000;
    res.t0RealtimeNs = realtimeNs() + opts.leadMs * 1'000'000;
    log.write({{"event", "plan-start"}, {"t0_mono_ns", res.t0MonoNs},
               {"t0_realtime_ns", res.t0RealtimeNs}, {"actions", plan.actions.size()},
               {"events", events.size()}, {"sched", res.schedPolicy},
               {"spin_ns", opts.spinNs}});
    int seq = 0;
    for (const Event& ev : events) {
      const PlanAction& a = plan.actions[ev.action];
      int64_t scheduled = res.t0MonoNs + ev.atMs * 1'000'000;
      if (waitUntil(scheduled, opts.stopFd, opts.spinNs) == WaitResult::kStopped) {
        res.stopped = true;
        break;
      }
      ActionRecord rec;
      rec.seq = seq++;
      rec.source = a.source;
      rec.kind = a.kind;
      rec.undo = ev.undo;
      rec.atMs = ev.atMs;
      rec.scheduledNs = scheduled;
      rec.startNs = monotonicNs();
      rec.startRealtimeNs = realtimeNs();
      if (ev.undo) {
        if (applied[ev.action]) rec.status = session.undo(*applied[ev.action]);
        applied[ev.action].reset();
      } else {
        auto f = session.apply(a);
        if (f) applied[ev.action] = *f;
        else rec.status = f.status();
      }
      rec.doneNs = monotonicNs();
      auto device = session.resolved(a.target);
      bool late = false;  // the carrier changes only at the syscall's end
      if (device && (a.kind == ActionKind::kCarrierOff || a.kind == ActionKind::kCarrierOn)) {
        auto control = carrierControl(*device);
        late = control.ok() && (*control == CarrierControl::kLabCable || !opts.holdTapQueues);
      }
      rec.effectNs = late ? rec.doneNs : rec.startNs;
      json line = {{"event", "action"}, {"seq", rec.seq}, {"source", rec.source},
                   {"action", actionName(a.kind)}, {"undo", rec.undo},
                   {"netns", a.target.netns}, {"dev", a.target.dev},
                   {"side", sideName(a.target.side)},
                   {"device", device ? device->toString() : std::string()},
                   {"at_ms", rec.atMs}, {"scheduled_mono_ns", rec.scheduledNs},
                   {"start_mono_ns", rec.startNs}, {"done_mono_ns", rec.doneNs},
                   {"effect_mono_ns", rec.effectNs}, {"start_realtime_ns", rec.startRealtimeNs},
                   {"late_ns", rec.startNs - rec.scheduledNs}, {"ok", rec.status.ok()}};
      if (a.kind == ActionKind::kDrop || a.kind == ActionKind::kBlackhole)
        line["rule"] = a.drop.toString();
      if (!rec.status.ok()) {
        line["error"] = rec.status.ToString();
        ++res.failed;
        RECCL_WARN(kLogInject, "plan action %d (%s %s) failed: %s", rec.seq, actionName(a.kind),
                   a.target.toString().c_str(), rec.status.ToString().c_str());
      }
      log.write(line);
      bool failed = !rec.status.ok();
      res.records.push_back(std::move(rec));
      // A plan that cannot do what it says is stopped rather than run half-way.
      if (failed) break;
    }
  }

  int64_t restoreStart = monotonicNs();
  res.restoreStatus = session.restore();
  log.write({{"event", "restore"}, {"start_mono_ns", restoreStart},
             {"done_mono_ns", monotonicNs()}, {"start_realtime_ns", realtimeNs()},
             {"ok", res.restoreStatus.ok()},
             {"error", res.restoreStatus.ok() ? std::string() : res.restoreStatus.ToString()}});

  std::vector<int64_t> late, done;
  for (const auto& r : res.records) {
    late.push_back(r.startNs - r.scheduledNs);
    done.push_back(r.doneNs - r.scheduledNs);
  }
  res.lateP50Ns = percentileNs(late, 0.5);
  res.lateP99Ns = percentileNs(late, 0.99);
  res.lateMaxNs = percentileNs(late, 1.0);
  res.doneP50Ns = percentileNs(done, 0.5);
  res.doneP99Ns = percentileNs(done, 0.99);
  res.doneMaxNs = percentileNs(done, 1.0);
  log.write({{"event", "plan-end"}, {"stopped", res.stopped}, {"executed", res.records.size()},
             {"failed", res.failed}, {"late_p50_ns", res.lateP50Ns}, {"late_p99_ns", res.lateP99Ns},
             {"late_max_ns", res.lateMaxNs}, {"done_p99_ns", res.doneP99Ns},
             {"done_max_ns", res.doneMaxNs}, {"end_mono_ns", monotonicNs()},
             {"end_realtime_ns", realtimeNs()}});
  res.logStatus = log.status();
  return res;
}

}  // namespace reccl::inject
