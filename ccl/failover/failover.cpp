#include "failover/failover.h"

#include <algorithm>
#include <bit>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/monitor.h"
#include "failover/rebalance/rail_meter.h"
#include "failover/rebalance/rail_picker.h"
#include "failover/relay/relay_route.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

namespace reccl::failover {
namespace {

Result<Settings> readSettings(const core::FailoverHost& host) {
  Settings s;
  s.rank = host.rank();
  s.nrails = std::clamp(host.topology().nrails, 1, kMaxRails);
  s.stallMs = std::max<int64_t>(1, params::StallTimeoutMs());
  s.timeoutMs = std::max<int64_t>(1, params::FailoverTimeoutMs());
  s.pollMs = std::clamp<int64_t>(params::FailoverPollMs(), 1, 1000);
  s.holdDownMs = std::max<int64_t>(0, params::HoldDownMs());
  s.detector = params::Detector();
  s.standbyOn = params::FailoverStandby() && s.nrails > 1;
  int64_t rt = params::FailoverRtPrio();
  if (rt < 0 || rt > 99)
    return Status(Errc::kInvalidArgument, "RECCL_FAILOVER_RT_PRIO=" + std::to_string(rt) + " is not 0 (off) or 1-99");
  s.rtPrio = static_cast<int>(rt);
  int64_t sliceUs = params::FailoverSliceUs();
  if (sliceUs != 0 && (sliceUs < 100 || sliceUs > 100000))
    return Status(Errc::kInvalidArgument,
                  "RECCL_FAILOVER_SLICE_US=" + std::to_string(sliceUs) + " is not 0 (kernel default) or 100-100000");
  s.sliceNs = static_cast<uint64_t>(sliceUs) * 1000;
  s.route = params::FailoverRoute();
  if (s.route != "auto" && s.route != "direct" && s.route != "relay")
    return Status(Errc::kInvalidArgument, "RECCL_FAILOVER_ROUTE=" + s.route + " is not auto, direct or relay");
  s.nicAffinity = params::NicAffinity();
  s.retransWindowMs = params::RetransWindowMs();
  s.retransThreshold = params::RetransThreshold();
  s.retransPerMille = params::RetransRate();
  s.rdmaLossWindowMs = params::RdmaLossWindowMs();
  // The detector pools an RDMA port's windows only with the share on (rdma_loss.h).
  s.rdmaLossPoolWindows = params::RdmaLossPpm() == 0 ? 0 : std::max<int64_t>(0, params::RdmaLossPool());
  // The detector pools windows only with its rate check on (docs/detector.md).
  s.retransPoolWindows = params::RetransRate() == 0 ? 0 : std::max<int64_t>(0, params::RetransPool());
  s.degradedClearMs = params::DegradedClearMs();
  return s;
}

}  // namespace

Result<std::unique_ptr<core::FailoverPart>> makeFailover(core::FailoverHost& host) {
  RECCL_ASSIGN_OR_RETURN(auto f, Failover::create(host));
  return std::unique_ptr<core::FailoverPart>(std::move(f));
}

Result<std::unique_ptr<Failover>> Failover::create(core::FailoverHost& host) {
  std::unique_ptr<Failover> f(new Failover());
  RECCL_TRY(f->start(host));
  return f;
}

Status Failover::start(core::FailoverHost& host) {
  RECCL_ASSIGN_OR_RETURN(Settings settings, readSettings(host));
  ctx_ = std::make_unique<FailoverContext>(host, std::move(settings));
  FailoverContext& ctx = *ctx_;
  ctx.rails.setRanks(host.nranks(), ctx.cfg.rank);
  meter_ = std::make_unique<RailMeter>(ctx);
  picker_ = std::make_unique<RailPicker>(ctx);
  relay_ = std::make_unique<RelayRoute>(ctx);
  migration_ = std::make_unique<Migration>(ctx);
  standbys_ = std::make_unique<Standbys>(ctx);
  monitor_ = std::make_unique<Monitor>(ctx);
  ctx.meter = meter_.get();
  ctx.picker = picker_.get();
  ctx.relay = relay_.get();
  ctx.migration = migration_.get();
  ctx.standbys = standbys_.get();
  ctx.monitor = monitor_.get();
  RECCL_TRY(standbys_->init());
  RECCL_TRY(relay_->start());  // this rank's relay server
  RECCL_TRY(monitor_->init());

  host.pathFailureHook().install(
      [m = monitor_.get()](const channel::PortId& id, const channel::Path* self, bool isSender, const Status& s) {
        return m->onPathFailure(id, self, isSender, s);
      });
  monitor_->start();
  migration_->start();
  standbys_->start();
  const Settings& c = ctx.cfg;
  RECCL_INFO(kLogFailover,
             "rank %d: failover on: %d rails, sources %s+socket-error+stall(%lld ms), timeout %lld ms, route %s%s, "
             "standby %s, rt prio %d, slice %llu us",
             c.rank, c.nrails, monitor_->sourceName().c_str(), static_cast<long long>(c.stallMs),
             static_cast<long long>(c.timeoutMs), c.route.c_str(), c.nicAffinity ? " (nic affinity)" : "",
             c.standbyOn ? "on" : "off", c.rtPrio, static_cast<unsigned long long>(c.sliceNs / 1000));
  return Status::Ok();
}

Failover::~Failover() { stop(); }

void Failover::stop() noexcept {
  if (stopped_ || !ctx_) return;
  stopped_ = true;
  ctx_->stop.store(true);
  // First: once this returns no path thread is inside the hook or enters it (PathFailureHook).
  ctx_->host.pathFailureHook().remove();
  if (relay_) relay_->stop();
  // Every thread woken, then joined: the monitor, the standby watcher, the migrators.
  if (migration_) migration_->wake();
  if (monitor_) monitor_->stop();
  if (standbys_) standbys_->stopWatcher();
  if (migration_) migration_->stop();
  if (standbys_) standbys_->closeAll();
}

Status Failover::onMigrationHello(UniqueFd fd, const core::Hello& h) {
  return migration_->onMigrationHello(std::move(fd), h);
}

core::FailoverPart::NewConnectionRails Failover::railsForNewConnection(int peer, int preferred) {
  // A dial unanswered for the stall time is a dead path, as a stalled connection is.
  return {picker_->forNewConnection(peer, preferred), ctx_->cfg.stallMs};
}

void Failover::fillStats(core::CommStats* s) const {
  const Counters& n = ctx_->counters;
  s->failovers = n.failovers.load();
  s->failbacks = n.failbacks.load();
  s->bytesResent = n.bytesResent.load();
  s->lastFailoverUs = n.lastFailoverUs.load();
  s->lastFailoverSignalNs = n.lastFailoverSignalNs.load();
  s->railsUp = static_cast<uint32_t>(std::popcount(ctx_->rails.upMask()));
  s->relayMigrations = n.relayMigrations.load();
  s->relayBytesForwarded = relay_->bytesForwarded();
  s->relayPipesServed = relay_->pipesServed();
  s->standbyFailovers = n.standbyFailovers.load();
  monitor_->fillStats(s);
}

}  // namespace reccl::failover
