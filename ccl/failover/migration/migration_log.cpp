// The failover line at each end of a committed move (WARN, subsystem FAILOVER), and the counters.
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "reccl/common/log.h"

namespace reccl::failover {

void Migration::log(const Conn& c, const Job& j, const Moved& m, int rail, bool initiated, uint64_t commitNs,
                    const Timeline* tl) {
  Counters& n = ctx_.counters;
  bool failBack = j.reason == MigrateReason::kFailBack;
  (failBack ? n.failbacks : n.failovers).fetch_add(1);
  uint64_t migUs = j.faultNs && commitNs > j.faultNs ? (commitNs - j.faultNs) / 1000 : 0;
  if (!failBack && migUs) {
    n.lastFailoverUs.store(migUs);
    n.lastFailoverSignalNs.store(j.faultNs);
  }
  // Timeline, us between stamps (initiator: signal>queued>thread>path>request sent>reply>commit;
  // passive end: hello seen>thread>request read>commit); -1: not reached. With the in-process
  // detector, the queue's split: signal>detector decided>monitor read it>queued. A move the
  // monitor made itself (Timeline::early): queued is when it began, the path hop is from there,
  // and there is no thread hop (-1).
  char tlText[360] = "";
  if (tl) {
    auto d = [](uint64_t from, uint64_t to) -> long long {
      return from && to && to >= from ? static_cast<long long>((to - from) / 1000) : -1;
    };
    if (initiated)
      snprintf(tlText, sizeof(tlText), ", timeline us: queue %lld thread %lld %s %lld request %lld reply %lld commit %lld",
               d(tl->signalNs, tl->queuedNs), d(tl->queuedNs, tl->runningNs), tl->standby ? "standby" : "connect",
               d(tl->early ? tl->queuedNs : tl->runningNs, tl->pathNs), d(tl->pathNs, tl->sentNs),
               d(tl->sentNs, tl->replyNs), d(tl->replyNs, tl->commitNs));
    if (initiated && tl->emitNs) {
      size_t len = strlen(tlText);
      snprintf(tlText + len, sizeof(tlText) - len, " (queue: detector %lld monitor wake %lld monitor %lld)",
               d(tl->signalNs, tl->emitNs), d(tl->emitNs, tl->seenNs), d(tl->seenNs, tl->queuedNs));
    }
    if (initiated && tl->early) {
      size_t len = strlen(tlText);
      snprintf(tlText + len, sizeof(tlText) - len, ", on the monitor thread");
    }
    // The passive end's split of its commit, from the request read: the connection's lock held
    // and the peer's record read, and the reply sent.
    if (!initiated)
      snprintf(tlText, sizeof(tlText), ", timeline us: thread %lld request %lld commit %lld (record %lld, reply sent %lld)",
               d(tl->queuedNs, tl->runningNs), d(tl->runningNs, tl->replyNs), d(tl->replyNs, tl->commitNs),
               d(tl->replyNs, tl->pathNs), d(tl->replyNs, tl->sentNs));
  }
  {
    size_t len = strlen(tlText);
    if (c.role == Role::kReceiver)
      snprintf(tlText + len, sizeof(tlText) - len, ", old path quiesced in %" PRIu64 " us, received step %" PRIu64,
               m.quiescedNs / 1000, m.step);
    else
      snprintf(tlText + len, sizeof(tlText) - len, ", resent after step %" PRIu64, m.step);
  }
  // "rail A (nic) -> rail B (nic)": the rail left and the rail taken.
  RECCL_WARN(kLogFailover,
             "rank %d: %s %s %s rail %d (%s) -> rail %d (%s) epoch %u: reason %s, source %s, fault-to-switch %" PRIu64
             " us, resent %" PRIu64 " bytes%s",
             ctx_.cfg.rank, failBack ? "fail-back" : "failover", initiated ? "of" : "by peer of", connName(c.id).c_str(),
             m.fromRail, ctx_.nicName(m.fromRail), rail, ctx_.nicName(rail), m.epoch, reasonName(j.reason),
             faultSourceName(j.source), migUs, m.resent, tlText);
}

void Migration::logStandbyFailed(const Conn& c, int rail, const Status& err) {
  RECCL_INFO(kLogFailover, "rank %d: %s: standby on rail %d failed: %s", ctx_.cfg.rank, connName(c.id).c_str(), rail,
             err.message().c_str());
}

}  // namespace reccl::failover
