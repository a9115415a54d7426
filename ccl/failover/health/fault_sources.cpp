// FaultSources (fault_sources.h): source choice, the daemon, the in-process detector, the poll.
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <thread>

#include "failover/context.h"
#include "failover/health/daemon_source.h"
#include "failover/health/fault_sources.h"
#include "failover/health/source_choice.h"
#include "failover/monitor.h"
#include "failover/thread_sched.h"
#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "reccl/reccl.h"
#ifdef RECCL_HAVE_DETECTOR
#include <map>

#include "reccl/detector/detector.h"
#include "reccl/detector/detector_options.h"
#endif

namespace reccl::failover {
namespace {
constexpr int64_t kDaemonRetryMinMs = 1000;
constexpr int64_t kDaemonRetryMaxMs = 30000;
}  // namespace

// The in-process link detector (BPF or rtnetlink) as the monitor holds it.
#ifdef RECCL_HAVE_DETECTOR
struct FaultSources::DetectorLink {
  std::unique_ptr<detector::Detector> det;
  std::map<std::string, int> railOf;  // ifname -> rail
};
#else
struct FaultSources::DetectorLink {};
#endif

struct FaultSources::Sources {
  SourcePlan plan;
  std::string mode;  // RECCL_DETECTOR as given
  std::string socketPath;
  int timeoutMs = 200;
  int pingMs = 500;  // RECCL_DETECTORD_PING_MS (0: no liveness pings)
  std::vector<RailNic> nics;
  std::unique_ptr<DaemonSource> daemon;
  bool daemonEver = false;      // connected once: a later connect is a reconnect
  int64_t retryMs = kDaemonRetryMinMs;
  uint64_t nextDaemonTryNs = 0;
  // The NIC poll still owns rails it declared down when another source took over; it brings
  // them back after its hold-down, then stops.
  bool pollDraining = false;
  // The in-process detector, started off the monitor thread (after the daemon is lost, or
  // under auto without a daemon): loading BPF takes 100s of ms, seconds on a busy host. The
  // loading thread owns its state (shared with this object) and touches nothing of the
  // communicator's, so an abort or destroy during the load does not wait for it: the thread is
  // let go and drops what it loaded when it ends.
  struct Start {
    std::mutex mu;
    bool done = false;  // under mu
    std::unique_ptr<DetectorLink> link;
    std::string names;
    Status err;
  };
  std::thread starter;
  std::shared_ptr<Start> start;
};

void FaultSources::SourcesDeleter::operator()(Sources* s) const noexcept {
  if (s->starter.joinable()) {
    bool done;
    {
      std::lock_guard lk(s->start->mu);
      done = s->start->done;
    }
    if (done)
      s->starter.join();
    else
      s->starter.detach();  // still loading BPF: it finishes and frees on its own (see Start)
  }
  delete s;
}

void FaultSources::startInProcessAsync() {
  Sources& s = *src_;
  if (s.starter.joinable()) return;
  s.start = std::make_shared<Sources::Start>();
  // Copies only: the thread may outlive this communicator (see Sources::Start).
  s.starter = std::thread([st = s.start, mode = s.plan.inProcessMode, nics = s.nics] {
    // Started by the monitor, which may run at FIFO (thread_sched.h): normal scheduling, so BPF
    // loading takes its fair share only. The detector gets no thread of its own: the monitor
    // drives it (startOnCaller), so a fault's ring-buffer record wakes the monitor itself.
    pthread_setname_np(pthread_self(), "reccl-detload");  // first: until now it is "reccl-monitor"
    dropToNormalScheduling();
#ifdef RECCL_HAVE_DETECTOR
    auto load = [&]() -> Result<std::unique_ptr<DetectorLink>> {
      auto opts = detector::DetectorOptions::fromEnv();
      RECCL_ASSIGN_OR_RETURN(opts.mode, detector::parseSourceMode(mode));
      auto link = std::make_unique<DetectorLink>();
      for (const auto& n : nics) {  // the rail NICs, loopback left out (startSources)
        opts.watch.push_back(detector::WatchSpec{"", n.ifname});
        link->railOf[n.ifname] = n.rail;
      }
      RECCL_ASSIGN_OR_RETURN(link->det, detector::Detector::create(std::move(opts)));
      RECCL_TRY(link->det->startOnCaller());
      return link;
    };
    auto link = load();
    std::string names;
    if (link.ok())
      for (auto src : link.value()->det->activeSources())
        names += std::string(names.empty() ? "" : ",") + detector::sourceName(src);
#else
    Result<std::unique_ptr<DetectorLink>> link = Status(Errc::kUnsupported, "built without the link detector");
    std::string names;
    (void)mode;
    (void)nics;
#endif
    std::lock_guard lk(st->mu);
    if (link.ok())
      st->link = std::move(link).value();
    else
      st->err = link.status();
    st->names = names;
    st->done = true;
  });
}

FaultSources::FaultSources(FailoverContext& ctx, Monitor& monitor)
    : ctx_(ctx), monitor_(monitor), poll_(ctx.cfg.nrails, ctx.cfg.holdDownMs) {
  for (int r = 0; r < ctx_.cfg.nrails && static_cast<size_t>(r) < ctx_.host.nics().size(); ++r)
    nicNames_.push_back(ctx_.host.nics()[r].name);
}

FaultSources::~FaultSources() { stop(); }

Status FaultSources::init() {
  RECCL_TRY(poll_.open());
  // Fault sources: the link detector when it runs here, else the NIC poll; in-band always.
  bool realNics = false;
  for (const auto& n : nicNames_) realNics |= n != "lo";
  // The detector loads BPF programs (tens to hundreds of ms): the monitor thread starts it, so
  // communicator set-up does not wait; until it runs, the NIC poll stands in.
  RECCL_TRY(planSources(ctx_.cfg.detector, realNics).status());  // refuse an unknown RECCL_DETECTOR here, at init
  pollNics_ = ctx_.cfg.detector != "none" && realNics;
  detectorName_ = pollNics_ ? "nic-poll" : "none";
  return Status::Ok();
}

int FaultSources::daemonFd() const { return src_ && src_->daemon ? src_->daemon->fd() : -1; }

void FaultSources::pollNics(uint64_t nowNs) {
  poll_.poll(nicNames_, nowNs, pollNics_, [&](int rail, bool up) {
    if (up)
      monitor_.railBackUp(rail, nowNs, FaultSource::kPoll);
    else
      monitor_.railDown(rail, FaultSource::kPoll, nowNs);
  });
}

void FaultSources::reconcile(const std::vector<std::pair<int, bool>>& states, FaultSource src, const char* why) {
  for (auto [rail, up] : states) {
    if (rail < 0 || rail >= ctx_.cfg.nrails) continue;
    if (!up && ctx_.rails.up(rail)) {
      lastSource_ = why;
      monitor_.railDown(rail, src, monotonicNs());
    } else if (up && !ctx_.rails.up(rail) && !(pollNics_ && poll_.holdsDown(rail))) {
      // The new source has the rail up (after its hold-down, if it saw the fault); a rail the
      // NIC poll holds down comes back through the poll's own hold-down.
      monitor_.railBackUp(rail, monotonicNs(), src);
    }
  }
}

void FaultSources::publish() {
  // What watches this rank's NICs now. The poll still draining rails after a takeover is not the
  // source any more; the daemon or the in-process detector is.
  uint32_t kind = recclFaultSourceInBand;
  std::string name = "in-band";
  if (src_ && src_->daemon) {
    kind = recclFaultSourceDaemon;
    name = "daemon:" + src_->daemon->sources();
  } else if (det_) {
#ifdef RECCL_HAVE_DETECTOR
    bool bpf = det_->det && det_->det->bpfActive();
#else
    bool bpf = false;
#endif
    kind = bpf ? recclFaultSourceBpf : recclFaultSourceRtnetlink;
    name = bpf ? "bpf:" + detectorName_ : "rtnetlink";
  } else if (pollNics_) {
    kind = recclFaultSourceNicPoll;
    name = "nic-poll";
  }
  // The in-process detector still probing and loading its BPF programs on its own thread.
  const bool starting = src_ && src_->starter.joinable();
  std::lock_guard lk(sourceMu_);
  sourceStarting_ = starting;
  if (kind == sourceKind_ && name == sourceInUse_) return;
  RECCL_TRACE(kLogFailover, "rank %d: fault source in use: %s (was %s)", ctx_.cfg.rank, name.c_str(),
              sourceInUse_.c_str());
  sourceKind_ = kind;
  sourceInUse_ = std::move(name);
}

void FaultSources::fillStats(core::CommStats* s) const {
  std::lock_guard lk(sourceMu_);
  s->faultSource = sourceKind_;
  s->faultSourceName = sourceInUse_;
  s->faultSourceStarting = sourceStarting_;
}

void FaultSources::start() {
  startInOrder();
  publish();
}

void FaultSources::startInOrder() {
  auto src = std::unique_ptr<Sources, SourcesDeleter>(new Sources());
  src->mode = ctx_.cfg.detector;
  src->socketPath = params::DetectordSocket();
  src->timeoutMs = static_cast<int>(std::clamp<int64_t>(params::DetectordTimeoutMs(), 1, 60000));
  src->pingMs = static_cast<int>(std::clamp<int64_t>(params::DetectordPingMs(), 0, 600000));
  bool realNics = false;
  for (int r = 0; r < static_cast<int>(nicNames_.size()); ++r)
    if (nicNames_[r] != "lo") {
      src->nics.push_back(RailNic{r, nicNames_[r]});
      realNics = true;
    }
  auto plan = planSources(src->mode, realNics);
  if (!plan.ok()) {  // start() refused it already; be safe
    pollNics_ = false;
    return;
  }
  src->plan = std::move(plan).value();
  src_ = std::move(src);
  Sources& s = *src_;
  for (SourceKind k : s.plan.order) {
    if (ctx_.stopping()) return;
    switch (k) {
      case SourceKind::kDaemon: {
        auto d = DaemonSource::open(s.socketPath, s.nics, s.timeoutMs);
        if (d.ok()) {
          s.daemon = std::move(d).value();
          s.daemonEver = true;
          pollNics_ = false;
          detectorName_ = "daemon(" + s.daemon->sources() + ")";
          if (auto st = s.daemon->railStates(); st.ok()) reconcile(st.value(), FaultSource::kDaemon, "status");
          RECCL_INFO(kLogFailover, "rank %d: fault source: daemon reccl-detectord on %s (%s; link-state %s)", ctx_.cfg.rank,
                     s.socketPath.c_str(), s.daemon->sources().c_str(), s.daemon->mapped() ? "mapped" : "not mapped");
          return;
        }
        s.nextDaemonTryNs = monotonicNs() + static_cast<uint64_t>(s.retryMs) * 1000000ull;
        if (s.mode == "daemon")
          RECCL_WARN(kLogFailover,
                     "rank %d: RECCL_DETECTOR=daemon: reccl-detectord on %s did not answer within %d ms (%s); "
                     "fault source: nic-poll until it does",
                     ctx_.cfg.rank, s.socketPath.c_str(), s.timeoutMs, d.status().message().c_str());
        break;
      }
      case SourceKind::kInProcess:
        // Loading BPF takes 100s of ms, seconds on a busy host: the NIC poll watches meanwhile
        // and the monitor keeps running (stall check included); tickSources adopts the detector.
        pollNics_ = true;
        detectorName_ = "nic-poll";
        startInProcessAsync();
        RECCL_INFO(kLogFailover, "rank %d: fault source: nic-poll while the in-process detector (%s) starts", ctx_.cfg.rank,
                   s.plan.inProcessMode.c_str());
        return;
      case SourceKind::kPoll:
        pollNics_ = true;
        detectorName_ = "nic-poll";
        RECCL_INFO(kLogFailover, "rank %d: fault source: nic-poll every %lld ms", ctx_.cfg.rank,
                   static_cast<long long>(ctx_.cfg.pollMs));
        return;
      case SourceKind::kNone:
        pollNics_ = false;
        detectorName_ = "none";
        RECCL_INFO(kLogFailover, "rank %d: fault source: in-band only (socket errors, stall check)", ctx_.cfg.rank);
        return;
    }
  }
}

void FaultSources::tick(uint64_t nowNs, short daemonRevents) {
  if (!src_) return;
  Sources& s = *src_;

  // 1. The daemon: its events, then one load per rail of its link-state array.
  if (s.daemon) {
    std::vector<RailSignal> sig;
    // Events first (those before an error too), then liveness: a daemon that hangs without
    // closing its socket answers no ping and is dropped like a dead one.
    Status st = daemonRevents ? s.daemon->receive(&sig) : Status::Ok();
    if (st.ok()) st = s.daemon->keepAlive(s.pingMs);
    s.daemon->checkLinkState(&sig);
    for (const auto& g : sig) {
      if (g.rail < 0 || g.rail >= ctx_.cfg.nrails) continue;
      lastSource_ = g.source;
      if (g.kind == RailSignal::Kind::kUp)
        monitor_.railBackUp(g.rail, g.signalNs, FaultSource::kDaemon);
      else  // a gray failure is routed around like a dead link, named as such
        monitor_.railDown(g.rail, FaultSource::kDaemon, g.signalNs,
                          g.kind == RailSignal::Kind::kDegraded ? MigrateReason::kDegraded : MigrateReason::kLinkDown);
    }
    if (!st.ok()) {
      // Reconcile before the poll takes over: a link the daemon's array shows down (its BPF
      // programs write it even when its userspace hangs) goes down now, whatever message about
      // it may have been lost.
      for (int r : s.daemon->railsDownInMap())
        if (r >= 0 && r < ctx_.cfg.nrails && ctx_.rails.up(r)) {
          lastSource_ = "link-state";
          monitor_.railDown(r, FaultSource::kDaemon, monotonicNs());
        }
      s.daemon.reset();
      // The NIC poll at once, from the rail state as it stands: rails down stay down until the
      // poll has seen them up for the hold-down.
      poll_.takeOver(ctx_.rails.upMask());
      pollNics_ = true;
      s.pollDraining = false;
      detectorName_ = "nic-poll";
      s.retryMs = kDaemonRetryMinMs;
      s.nextDaemonTryNs = nowNs + static_cast<uint64_t>(s.retryMs) * 1000000ull;
      bool inProcess = std::find(s.plan.order.begin(), s.plan.order.end(), SourceKind::kInProcess) != s.plan.order.end();
      RECCL_WARN(kLogFailover, "rank %d: reccl-detectord lost (%s); fault source: nic-poll%s, retrying the daemon", ctx_.cfg.rank,
                 st.message().c_str(), inProcess && !det_ ? " while the in-process detector starts" : "");
      if (inProcess && !det_) startInProcessAsync();
    }
  }

  // 2. An in-process detector loaded off the monitor thread: adopt it unless the daemon is back.
  if (s.starter.joinable()) {
    bool done;
    {
      std::lock_guard lk(s.start->mu);
      done = s.start->done;
    }
    if (done) {
      s.starter.join();
      Sources::Start& ld = *s.start;
      if (ld.link && !s.daemon && !det_) {
        det_ = std::move(ld.link);
        detectorName_ = ld.names;
        s.pollDraining = true;
        if (s.daemonEver)
          RECCL_WARN(kLogFailover, "rank %d: fault source: in-process detector (%s) after losing reccl-detectord",
                     ctx_.cfg.rank, detectorName_.c_str());
        else
          RECCL_INFO(kLogFailover, "rank %d: fault source: in-process detector (%s)", ctx_.cfg.rank, detectorName_.c_str());
#ifdef RECCL_HAVE_DETECTOR
        std::vector<std::pair<int, bool>> states;
        for (const auto& l : det_->det->status().links)
          if (auto it = det_->railOf.find(l.watch.ifname); it != det_->railOf.end())
            states.emplace_back(it->second, l.status.state == detector::LinkState::kUp);
        reconcile(states, FaultSource::kDetector, "status");
#endif
      } else if (!ld.link && !ld.err.ok()) {
        // auto falls through to the poll quietly, as planned; an explicit mode or a lost daemon warns.
        if (s.mode != "auto" || s.daemonEver)
          RECCL_WARN(kLogFailover, "rank %d: RECCL_DETECTOR=%s: in-process detector unavailable (%s); fault source stays nic-poll",
                     ctx_.cfg.rank, s.mode.c_str(), ld.err.message().c_str());
        else
          RECCL_INFO(kLogFailover, "rank %d: in-process detector unavailable (%s); fault source: nic-poll", ctx_.cfg.rank,
                     ld.err.message().c_str());
      }
      s.start.reset();  // a detector the daemon made unneeded is stopped here
    }
  }

  // 3. The daemon again, when the plan wants it and it is time.
  if (s.plan.retryDaemon && !s.daemon && nowNs >= s.nextDaemonTryNs) {
    auto d = DaemonSource::open(s.socketPath, s.nics, s.timeoutMs);
    if (!d.ok()) {
      // No daemon there costs a failed connect: try again each period. One that hangs costs
      // this thread up to the timeout per try: back off.
      s.retryMs = d.status().code() == Errc::kTimeout ? std::min(s.retryMs * 2, kDaemonRetryMaxMs) : kDaemonRetryMinMs;
      s.nextDaemonTryNs = monotonicNs() + static_cast<uint64_t>(s.retryMs) * 1000000ull;
      RECCL_TRACE(kLogFailover, "rank %d: reccl-detectord on %s: %s", ctx_.cfg.rank, s.socketPath.c_str(),
                  d.status().message().c_str());
    } else {
      s.daemon = std::move(d).value();
      s.retryMs = kDaemonRetryMinMs;
      if (det_) stopDetector();  // the daemon replaces the in-process detector
      detectorName_ = "daemon(" + s.daemon->sources() + ")";
      s.pollDraining = pollNics_;
      if (auto st = s.daemon->railStates(); st.ok()) reconcile(st.value(), FaultSource::kDaemon, "status");
      RECCL_WARN(kLogFailover, "rank %d: fault source: daemon reccl-detectord on %s (%s; link-state %s)%s", ctx_.cfg.rank,
                 s.socketPath.c_str(), s.daemon->sources().c_str(), s.daemon->mapped() ? "mapped" : "not mapped",
                 s.daemonEver ? " again" : "");
      s.daemonEver = true;
    }
  }

  // 4. The poll stops once it has handed back every rail it held down.
  if (s.pollDraining && (s.daemon || det_)) {
    if (!poll_.holdsAny()) {
      pollNics_ = false;
      s.pollDraining = false;
    }
  }
  publish();
}

uint64_t FaultSources::dueNs(uint64_t nowNs) const {
  constexpr uint64_t kMs = 1'000'000ull;
  if (!src_) return UINT64_MAX;
  const Sources& s = *src_;
  if (s.daemon) {
    // The ping's period and the pong's deadline are checked at this tick, and the mapped
    // link-state array (a fault the daemon's userspace has not sent yet) is read at it.
    uint64_t tick = s.pingMs > 0 ? std::clamp<uint64_t>(static_cast<uint64_t>(s.pingMs) / 4, 5, 50) : 50;
    return nowNs + tick * kMs;
  }
  if (s.starter.joinable()) return nowNs + 20 * kMs;  // the in-process detector is loading
  if (s.plan.retryDaemon) return std::max(s.nextDaemonTryNs, nowNs + kMs);
  return UINT64_MAX;
}

void FaultSources::stop() noexcept {
  src_.reset();
  stopDetector();
}

#ifdef RECCL_HAVE_DETECTOR

int FaultSources::detectorFd() const { return det_ && det_->det ? det_->det->pollFd() : -1; }

void FaultSources::stopDetector() noexcept {
  if (det_ && det_->det) det_->det->stop();
  det_.reset();
}

void FaultSources::drainDetector() {
  if (!det_) return;
  det_->det->dispatch();
  for (const auto& e : det_->det->drain()) {
    auto it = det_->railOf.find(e.ifname);
    if (it == det_->railOf.end()) continue;
    switch (e.type) {
      case detector::LinkEventType::kLinkDown:
      case detector::LinkEventType::kLinkDegraded:  // a gray failure is routed around like a dead link
        lastSource_ = detector::sourceName(e.source);
        monitor_.railDown(it->second, FaultSource::kDetector, e.signalNs,
                          e.type == detector::LinkEventType::kLinkDegraded ? MigrateReason::kDegraded
                                                                           : MigrateReason::kLinkDown,
                          e.emitNs);
        break;
      case detector::LinkEventType::kLinkUp:  // after the detector's hold-down and flap damping
        monitor_.railBackUp(it->second, e.emitNs, FaultSource::kDetector);
        break;
    }
  }
}
#else
int FaultSources::detectorFd() const { return -1; }
void FaultSources::stopDetector() noexcept { det_.reset(); }
void FaultSources::drainDetector() {}
#endif

}  // namespace reccl::failover
