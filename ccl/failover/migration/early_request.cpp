// A fault's move over a standby, done on the monitor thread (Migration::beginEarly,
// concludeEarly). Over a standby a move is one request and its reply. Queued for a migrator
// thread, it costs two wake-ups of that thread (before the request, and for the reply), and on a
// host whose CPUs are busy each wake-up can wait for a CPU. The monitor is awake for the fault
// anyway: it sends the request, polls the standby for the reply with its other descriptors, and
// commits; no migrator thread runs for a move that commits. Only what never waits runs here:
// the connection's lock is tried, the request is a few hundred bytes on an idle link, the reply
// is read once the descriptor is readable, and a commit hands the paths to the engine without
// waiting for it (a sender's old path is reaped after every reply there is committed: a fault
// moves both directions of a peer pair, and the second must not wait for the first's engine).
// Anything else (relay route, no standby, lock held, no reply, refused) is the migrator
// thread's, as for any move.
#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/rebalance/rail_picker.h"
#include "failover/relay/relay_route.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {
constexpr int64_t kEarlySendMs = 1000;  // an idle link's socket buffer takes the request at once
// The reply is read once it is there: a reply (48 B) and, on verbs, the peer's record behind it.
constexpr int64_t kEarlyReadMs = 100;
}  // namespace

std::optional<Job> Migration::beginEarly(Job j) {
  auto c = ctx_.conns.find(j.id);
  if (!c || !c->jobs.claim(j)) return std::nullopt;
  if (ctx_.cfg.standbyOn && j.reason != MigrateReason::kFailBack && !ctx_.relay->wanted(*c, j))
    j.early = proposeEarly(*c, j);
  if (j.early) return j;
  push(std::move(j));
  return std::nullopt;
}

std::shared_ptr<EarlyRequest> Migration::proposeEarly(Conn& c, const Job& j) {
  auto e = std::make_shared<EarlyRequest>();
  e->startNs = monotonicNs();
  {
    // Before the standby is taken: a lock held (a commit in progress) leaves the move to a
    // migrator thread, and a connection already moved (by the peer, or a job just ended) keeps
    // its standby for the next fault.
    std::unique_lock lk(c.mu, std::try_to_lock);
    if (!lk.owns_lock() || jobMoot(j, c.port->path(), c.rail.load())) return nullptr;
  }
  e->link = ctx_.standbys->take(c, j, 0, &e->rail);
  if (!e->link) return nullptr;
  ctx_.picker->claimMove(c, e->rail);
  e->pathNs = monotonicNs();
  Timeline tl;
  Status err;
  Attempt a = propose(c, e->rail, j, false, *e->link, Deadline::afterMs(kEarlySendMs), false, &e->epoch, &err, &tl);
  if (a == Attempt::kDone) {
    e->sentNs = tl.sentNs;
    return e;
  }
  c.movingTo.store(-1);
  // The lock taken or the connection moved since the look above (a race of microseconds), or the
  // standby dead: closed (the upkeep replaces it), and the move is a migrator thread's.
  if (a == Attempt::kFailed) logStandbyFailed(c, e->rail, err);
  e->link->closeNow();
  return nullptr;
}

void Migration::concludeEarly(Job j, bool replied, std::vector<channel::Path*>& drainLater) {
  std::shared_ptr<EarlyRequest> e = std::move(j.early);
  auto c = ctx_.conns.find(j.id);
  if (!c || !e) return;
  Timeline tl;
  tl.signalNs = j.faultNs;
  tl.emitNs = j.emitNs;
  tl.seenNs = j.seenNs;
  tl.queuedNs = e->startNs;
  tl.pathNs = e->pathNs;
  tl.sentNs = e->sentNs;
  tl.standby = true;
  tl.early = true;
  Attempt a;
  Moved moved;
  Status err;
  if (replied) {
    a = conclude(*c, e->rail, j, std::move(e->link), -1, e->epoch, Deadline::afterMs(kEarlyReadMs), &err, &moved, &tl,
                 &drainLater);
  } else {
    c->handshakeUnsure.store(true);  // the peer may have committed the request it read
    err = Status(Errc::kTimeout, "no reply within " + std::to_string(kEarlyReplyMs) + " ms");
    a = release(*c, e->epoch, Attempt::kFailed);
  }
  c->movingTo.store(-1);
  if (a == Attempt::kDone) {
    ctx_.counters.standbyFailovers.fetch_add(1);
    log(*c, j, moved, e->rail, true, tl.commitNs, &tl);
  }
  if (a == Attempt::kDone || a == Attempt::kStale) {
    if (auto next = c->jobs.finish()) push(std::move(*next));  // the job that waited for it
    return;
  }
  if (a == Attempt::kPeerFailed) {
    failWithPeer(*c, err);
    if (auto next = c->jobs.finish()) push(std::move(*next));  // it finds the communicator failed
    return;
  }
  if (a == Attempt::kFailed) logStandbyFailed(*c, e->rail, err);
  push(std::move(j));  // a migrator thread carries on (its slot is still claimed)
}

}  // namespace reccl::failover
