// One migration job: the relay route when the policy wants it, else the direct route, one rail
// per try (a standby's, a fail-back's own, or the picker's), until a try commits, the peer's
// newer proposal wins, or RECCL_FAILOVER_TIMEOUT_MS from the fault's first signal passes (then the
// communicator fails: no path to the peer).
#include <cinttypes>
#include <cstdio>
#include <thread>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/rebalance/rail_picker.h"
#include "failover/relay/relay_route.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {

constexpr int64_t kAttemptMs = 1000;  // one connect + handshake on a candidate rail
// A fail-back onto a rail that the peer last reported down: a connect on a veth or a LAN takes
// well under a millisecond; one that is not done in this time waits for a SYN retransmission (1 s).
constexpr int64_t kSpeculativeFailBackMs = 200;

}  // namespace

void Migration::runJob(const Job& j) {
  auto c = ctx_.conns.find(j.id);
  if (!c) return;
  Timeline tl;
  tl.signalNs = j.faultNs;
  tl.emitNs = j.emitNs;
  tl.seenNs = j.seenNs;
  tl.queuedNs = j.queuedNs;
  tl.runningNs = monotonicNs();
  bool failBack = j.reason == MigrateReason::kFailBack;
  // Deadline of an unrecoverable fault: RECCL_FAILOVER_TIMEOUT_MS from its first signal, at least
  // one attempt from the stall check's verdict.
  Deadline deadline = Deadline::afterMs(failoverBudgetMs(j, monotonicNs(), ctx_.cfg.timeoutMs, kAttemptMs));
  if (failBack) deadline = Deadline::afterMs(kAttemptMs * 2);
  {
    // A job deferred behind another (Migration::enqueue) often finds it done. Under the
    // connection's lock: a passive commit in progress (whose close of the old path queued an
    // ifPath job) ends first.
    std::lock_guard lk(c->mu);
    if (jobMoot(j, c->port->path(), c->rail.load())) return;
  }
  // Relay route first when RECCL_FAILOVER_ROUTE asks for it (relay/); else, or when no relay
  // works, the direct route below.
  if (!failBack) {
    auto r = ctx_.relay->first(*c, j, deadline);
    if (r != RelayRoute::Outcome::kFallBack) return;
  }
  uint64_t tried = 0;
  Status last(Errc::kLinkFailure, "no healthy rail");
  while (!ctx_.stopping() && !ctx_.broken() && !c->port->failed()) {
    int cur = c->rail.load();
    if (jobMoot(j, c->port->path(), cur)) return;
    // A pre-connected standby on a usable rail: the handshake only, no connect.
    int rail = -1;
    std::unique_ptr<transport::Link> standby = failBack ? nullptr : ctx_.standbys->take(*c, j, tried, &rail);
    if (!standby) {
      // The peer's side of a fail-back's rail is only known from its last migration message, which
      // may be stale: a DEGRADED or a hold-down there that has ended since is told to nobody.
      // Waiting for the peer to report it would leave both ends waiting for each other (every
      // connection kept off the repaired rail, so each later fault on it finds nothing to move).
      // The handshake carries both ends' rails, and the peer refuses a fail-back onto a rail that
      // is not up there (servePassive): one try per up event settles it.
      MoveChoiceInput in;
      in.reason = j.reason;
      in.fromRail = j.fromRail;
      in.toRail = j.toRail;
      in.currentRail = cur;
      in.upHere = ctx_.rails.upMask();
      in.grayHere = ctx_.rails.grayMask();
      in.tried = tried;
      in.weights = ctx_.picker->weights(c->peer);
      MoveChoice m = ctx_.picker->pickMove(*c, std::move(in));
      if (m.stay) {
        // A gray rail still carries bytes: with no healthy rail to move to, staying on it beats
        // any rail declared down and beats failing the communicator (a false DEGRADED on a
        // one-rail job would do exactly that). It moves when a rail comes back or a hard fault hits.
        RECCL_WARN(kLogFailover, "rank %d: %s: rail %d degraded and no healthy rail to move to: staying on it",
                   ctx_.cfg.rank, connName(c->id).c_str(), cur);
        return;
      }
      rail = m.rail;
      // A try against the peer's last word is short: a connect to a NIC that is really down would
      // hold this connection's job (and any fault on its rail meanwhile) for a whole SYN timeout.
      if (m.speculative) deadline = Deadline::afterMs(kSpeculativeFailBackMs);
    }
    if (rail < 0) {
      if (failBack) return;  // stay where it is; the next up event tries again
      if (deadline.expired()) break;
      // Nothing healthy right now: a rail may come back before the deadline.
      tried = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(20, ctx_.cfg.pollMs * 4)));
      continue;
    }
    Moved moved;
    Status err;
    bool viaStandby = static_cast<bool>(standby);
    if (viaStandby) ctx_.picker->claimMove(*c, rail);  // a move over a standby claims its rail as a pick does
    Attempt a = attempt(*c, rail, j, deadline, std::move(standby), &err, &moved, &tl);
    c->movingTo.store(-1);  // done: committed (its rail counts now) or not
    if (a == Attempt::kDone) {
      if (viaStandby) ctx_.counters.standbyFailovers.fetch_add(1);
      log(*c, j, moved, rail, true, tl.commitNs, &tl);
      return;
    }
    if (a == Attempt::kStale) return;  // the peer's newer proposal is (or was) applied here
    if (a == Attempt::kPeerFailed) return failWithPeer(*c, err);
    if (a == Attempt::kNotReady) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else if (viaStandby) {
      // The standby failed (peer gone, or its rail died unnoticed): try the rail with a new
      // connection rather than rule it out.
      last = err;
      logStandbyFailed(*c, rail, err);
    } else {
      last = err;
      if (rail < 64) tried |= 1ull << rail;
      RECCL_INFO(kLogFailover, "rank %d: %s: rail %d failed: %s", ctx_.cfg.rank, connName(c->id).c_str(), rail,
                 err.message().c_str());
    }
    if (deadline.expired()) break;
  }
  if (failBack || ctx_.stopping() || ctx_.broken() || c->port->failed()) return;
  char mask[64];
  snprintf(mask, sizeof(mask), "0x%" PRIx64 " here, 0x%" PRIx64 " at rank %d", ctx_.rails.upMask(),
           ctx_.rails.peerRails(c->peer), c->peer);
  unrecoverable(*c, Status(Errc::kLinkFailure,
                           "rank " + std::to_string(ctx_.cfg.rank) + ": no path for " + connName(c->id) + " within " +
                               "RECCL_FAILOVER_TIMEOUT_MS=" + std::to_string(ctx_.cfg.timeoutMs) + " (rails up " +
                               mask + "): " + last.message()));
}

Attempt Migration::attempt(Conn& c, int rail, const Job& j, Deadline deadline, std::unique_ptr<transport::Link> standby,
                           Status* err, Moved* moved, Timeline* tl) {
  std::unique_ptr<transport::Link> link;
  bool withHello = true;
  if (standby) {
    link = std::move(standby);  // authenticated when it was opened: the request alone follows
    withHello = false;
    tl->standby = true;
  } else {
    tl->standby = false;
    auto made = ctx_.paths.connect(c.peer, rail, deadline.within(kAttemptMs));
    if (!made.ok()) {
      if (made.status().code() == Errc::kPeerFailure) {
        // Nothing listens at the peer: no rail or retry can help.
        *err = made.status().Wrap("rank " + std::to_string(c.peer) + " is gone (its process exited or its " +
                                  "communicator was destroyed): rail " + std::to_string(rail));
        return Attempt::kPeerFailed;
      }
      *err = made.status();
      return Attempt::kFailed;
    }
    link = std::move(made).value();
    // A fail-back whose rail went down again while connecting: nothing is committed yet.
    if (j.reason == MigrateReason::kFailBack && !ctx_.rails.up(rail)) {
      *err = Status(Errc::kLinkFailure, "rail " + std::to_string(rail) + " down again");
      return Attempt::kFailed;
    }
  }
  tl->pathNs = monotonicNs();
  // The peer commits as soon as the request arrives: the reply gets a deadline of its own, so a
  // connect that used up the attempt's time (SYN retransmitted after a link came back) does not
  // leave the peer on a path this end has closed, which would fail both ends' communicators.
  Attempt a = handshake(c, rail, j, withHello, std::move(link), -1, Deadline::afterMs(kAttemptMs), err, moved, tl);
  if (a == Attempt::kFailed) *err = err->Wrap("migration handshake on rail " + std::to_string(rail));
  return a;
}

void Migration::failWithPeer(Conn& c, const Status& peerFailed) {
  if (!ctx_.stopping() && !ctx_.broken() && !c.port->failed())
    unrecoverable(c, peerFailed.Wrap("rank " + std::to_string(ctx_.cfg.rank)));
}

void Migration::unrecoverable(Conn& c, const Status& s) {
  RECCL_WARN(kLogFailover, "%s", s.message().c_str());
  c.port->lose(s);
  ctx_.host.breakComm(s);
}

}  // namespace reccl::failover
