// Connection migration: open a path on another rail, agree on {epoch, receiver's step} with the
// peer, resend from the sender's slots, retire the old path.
#include <array>
#include <atomic>
#include <cinttypes>
#include <memory>
#include <optional>
#include <pthread.h>
#include <sys/socket.h>
#include <cstring>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "failover/failover.h"
#include "failover/rebalance.h"
#include "failover/thread_sched.h"
#include "reccl/common/log.h"
#include "transport/socket_paths.h"
#include "transport/socket_util.h"

namespace reccl::failover {
namespace {

constexpr int64_t kAttemptMs = 1000;     // one connect + handshake on a candidate rail
constexpr int64_t kPassiveReadMs = 1000; // the request follows the hello at once
// A fail-back onto a rail that the peer last reported down: a connect on a veth or a LAN takes
// well under a millisecond; one that is not done in this time waits for a SYN retransmission (1 s).
constexpr int64_t kSpeculativeFailBackMs = 200;

// Drops a TCP connection on the spot (connect(AF_UNSPEC): tcp_disconnect): its unacknowledged
// data and FIN are purged, so the kernel stops retransmitting them. shutdown() alone leaves a
// retired socket on a dead link retransmitting for seconds (RTO backoff), and those
// retransmissions read as a DEGRADED rail to a retransmit-counting detector after the link is
// back (measured: everything moved off the repaired rail ~2 s after a fault, so that the next
// fault on it found no connection there). Errors are of no interest: the socket is retired.
void abortTcp(int fd) noexcept {
  sockaddr sa{};
  sa.sa_family = AF_UNSPEC;
  [[maybe_unused]] int rc = ::connect(fd, &sa, sizeof(sa));
}

}  // namespace

// A rail fault moves every connection on it at once (both directions of each peer pair), and
// the far end takes each over: the jobs of both kinds run on pre-started migrator threads, so
// the connections' handshakes overlap instead of queueing (measured: the second of two
// connections committed ~2 ms after the first when run one by one), and no thread is created on
// the fault's path (it was one per job before). A thread that takes the last idle slot starts
// one more, so a job blocked in a connect never delays another; all are joined at stop.
void Failover::startMigrator() {
  if (stop_.load()) return;
  pool_.emplace_back([this] { migratorLoop(); });
}

void Failover::migratorLoop() {
  applyThreadSched("migrator", "reccl-migrator");
  std::unique_lock lk(qMu_);
  for (;;) {
    ++idle_;
    qCv_.wait(lk, [&] { return stop_.load() || !jobs_.empty() || !passive_.empty(); });
    --idle_;
    if (stop_.load()) break;
    // The peer's handshakes first: the peer's migration waits on them.
    std::optional<Passive> p;
    std::optional<Job> j;
    if (!passive_.empty()) {
      p.emplace(std::move(passive_.front()));
      passive_.pop_front();
    } else {
      j = jobs_.front();
      jobs_.pop_front();
    }
    if (idle_ == 0) {
      lk.unlock();
      {
        std::lock_guard pl(poolMu_);
        startMigrator();
      }
      lk.lock();
    }
    lk.unlock();
    if (p) {
      handlePassive(std::move(*p));
    } else if (j->reason == MigrateReason::kStandby) {
      if (auto c = find(j->id)) {
        makeStandby(*c);
        c->standbyMaking.store(false);
      }
    } else {
      runJob(*j);
      if (auto c = find(j->id)) c->queued.store(false);
    }
    lk.lock();
  }
}

void Failover::applyThreadSched(const char* what, const char* threadName) {
  pthread_setname_np(pthread_self(), threadName);  // top -H, ps -L, perf show it
  if (rtPrio_ > 0) {
    Status s = raiseToFifo(rtPrio_);
    if (s.ok()) return;
    if (!rtLogged_.exchange(true))
      RECCL_INFO(kLogFailover, "rank %d: RECCL_FAILOVER_RT_PRIO=%d: SCHED_FIFO for the %s thread refused (%s); normal scheduling",
                 rank_, rtPrio_, what, s.message().c_str());
  }
  if (sliceNs_ == 0) return;
  Status s = requestSlice(sliceNs_);
  if (!s.ok() && !sliceLogged_.exchange(true))
    RECCL_INFO(kLogFailover, "rank %d: RECCL_FAILOVER_SLICE_US: the %s thread keeps the default slice (%s)", rank_,
               what, s.message().c_str());
}

void Failover::runJob(const Job& j) {
  auto c = find(j.id);
  if (!c) return;
  Timeline tl;
  tl.signalNs = j.faultNs;
  tl.emitNs = j.emitNs;
  tl.seenNs = j.seenNs;
  tl.queuedNs = j.queuedNs;
  tl.runningNs = monotonicNs();
  bool failBack = j.reason == MigrateReason::kFailBack;
  // Deadline of an unrecoverable fault: RECCL_FAILOVER_TIMEOUT_MS from its first signal.
  uint64_t startNs = j.faultNs ? j.faultNs : monotonicNs();
  Deadline deadline = Deadline::afterMs(
      std::max<int64_t>(1, timeoutMs_ - static_cast<int64_t>((monotonicNs() - std::min(monotonicNs(), startNs)) / 1000000)));
  if (failBack) deadline = Deadline::afterMs(kAttemptMs * 2);
  // Relay route first when RECCL_FAILOVER_ROUTE asks for it (relay.cpp); else, or when no relay
  // works, the direct route below.
  if (!failBack) {
    auto r = relayFirst(*c, j, deadline);
    if (r != RelayOutcome::kFallBack) return;
  }
  std::set<int> tried;
  Status last(Errc::kLinkFailure, "no healthy rail");
  while (!stop_.load() && !broken() && !c->port->failed()) {
    int cur = c->rail.load();
    // Someone (the peer, or an earlier job) already moved it.
    if (!failBack && j.fromRail >= 0 && cur != j.fromRail) return;
    if (failBack && cur == j.toRail) return;
    int peer = c->peer;
    // A pre-connected standby on a usable rail: the handshake only, no connect.
    int rail = -1;
    UniqueFd standby = failBack ? UniqueFd() : takeStandby(*c, j, tried, &rail);
    auto weights = railWeights(peer);
    if (standby) {
      // rail: the standby's (takeStandby checked it is usable)
    } else if (failBack) {
      // The peer's side of the rail is only known from its last migration message, which may be
      // stale: a DEGRADED or a hold-down there that has ended since is told to nobody. Waiting
      // for the peer to report it left both ends waiting for each other (seen: every connection
      // kept off the repaired rail for the rest of a run, so each later fault on it found nothing
      // to move). The handshake carries both ends' rails, and the peer refuses a fail-back onto a
      // rail that is not up there (servePassive): one try per up event settles it.
      rail = j.toRail >= 0 && j.toRail < nrails_ && railUp(j.toRail) && !tried.count(j.toRail) ? j.toRail : -1;
      // A try against the peer's last word is short: a connect to a NIC that is really down would
      // hold this connection's job (and any fault on its rail meanwhile) for a whole SYN timeout.
      if (rail >= 0 && weights[rail] <= 0) deadline = Deadline::afterMs(kSpeculativeFailBackMs);
    } else {
      for (int t : tried) weights[t] = 0;
      if (j.fromRail >= 0 && j.fromRail < nrails_) weights[j.fromRail] = 0;
      rail = pickMoveRail(*c, weights);
      if (rail < 0 && j.reason == MigrateReason::kDegraded && cur == j.fromRail) {
        // A gray rail still carries bytes: with no healthy rail to move to, staying on it beats
        // any rail declared down and beats failing the communicator (a false DEGRADED on a
        // one-rail job did exactly that). It moves when a rail comes back or a hard fault hits.
        RECCL_WARN(kLogFailover, "rank %d: %s: rail %d degraded and no healthy rail to move to: staying on it",
                   rank_, connName(c->id).c_str(), cur);
        return;
      }
      if (rail < 0) {
        // Last resort: a rail declared down here or at the peer may be physically up again while
        // the detector still holds it down (hold-down, flap damping); better than failing.
        std::vector<double> any(nrails_, 1.0);
        for (int t : tried) any[t] = 0;
        // A stall or socket error says nothing certain about this end's NIC: while the rail is
        // up here, a fresh connection on it is worth a try before giving up.
        bool inBand = j.reason == MigrateReason::kStall || j.reason == MigrateReason::kSocketError;
        if (j.fromRail >= 0 && j.fromRail < nrails_ && !(inBand && railUp(j.fromRail))) any[j.fromRail] = 0;
        rail = pickMoveRail(*c, any);
      }
    }
    if (rail < 0) {
      if (failBack) return;  // stay where it is; the next up event tries again
      if (deadline.expired()) break;
      // Nothing healthy right now: a rail may come back before the deadline.
      tried.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(20, pollMs_ * 4)));
      continue;
    }
    uint32_t epoch = 0;
    uint64_t resent = 0;
    Status err;
    bool viaStandby = static_cast<bool>(standby);
    if (standby) {  // a move over a standby claims its rail as a pick does (pickMoveRail)
      std::lock_guard pk(pickMu_);
      c->movingTo.store(rail);
    }
    Attempt a = attempt(*c, rail, j, deadline, std::move(standby), &err, &epoch, &resent, &tl);
    c->movingTo.store(-1);  // done: committed (its rail counts now) or not
    if (a == Attempt::kDone) {
      if (viaStandby) standbyFailovers_.fetch_add(1);
      logMigration(*c, j, epoch, rail, resent, true, tl.commitNs, &tl);
      return;
    }
    if (a == Attempt::kStale) return;  // the peer's newer proposal is (or was) applied here
    if (a == Attempt::kNotReady) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else if (viaStandby) {
      // The standby failed (peer gone, or its rail died unnoticed): try the rail with a new
      // connection rather than rule it out.
      last = err;
      RECCL_INFO(kLogFailover, "rank %d: %s: standby on rail %d failed: %s", rank_, connName(c->id).c_str(), rail,
                 err.message().c_str());
    } else {
      last = err;
      tried.insert(rail);
      RECCL_INFO(kLogFailover, "rank %d: %s: rail %d failed: %s", rank_, connName(c->id).c_str(), rail,
                 err.message().c_str());
    }
    if (deadline.expired()) break;
  }
  if (failBack || stop_.load() || broken() || c->port->failed()) return;
  char mask[64];
  snprintf(mask, sizeof(mask), "0x%" PRIx64 " here, 0x%" PRIx64 " at rank %d", railsUp_.load(), peerRails(c->peer),
           c->peer);
  unrecoverable(*c, Status(Errc::kLinkFailure,
                           "rank " + std::to_string(rank_) + ": no path for " + connName(c->id) + " within " +
                               "RECCL_FAILOVER_TIMEOUT_MS=" + std::to_string(timeoutMs_) + " (rails up " + mask +
                               "): " + last.message()));
}

Failover::Attempt Failover::attempt(Conn& c, int rail, const Job& j, Deadline deadline, UniqueFd standby,
                                    Status* err, uint32_t* epochOut, uint64_t* resentOut, Timeline* tl) {
  int peer = c.peer;
  const auto& pi = comm_.table_[peer];
  const auto& src = comm_.myNics_[rail];
  if (static_cast<size_t>(rail) >= pi.nics.size()) {
    *err = Status(Errc::kInternal, "peer has no nic on rail " + std::to_string(rail));
    return Attempt::kFailed;
  }
  UniqueFd fd;
  bool withHello = true;
  if (standby) {
    fd = std::move(standby);  // authenticated when it was opened: the request alone follows
    withHello = false;
    tl->standby = true;
  } else {
    tl->standby = false;
    transport::Endpoint dst{pi.nics[rail].addr, pi.dataPort};
    auto atMost = Deadline::afterMs(kAttemptMs);
    Deadline dl = atMost.at() < deadline.at() ? atMost : deadline;
    auto fdr = transport::connectTcp(dst, src.addr, src.name == "lo" ? "" : src.name, dl);
    if (!fdr.ok()) {
      *err = fdr.status();
      return Attempt::kFailed;
    }
    fd = std::move(fdr).value();
    transport::tuneDataSocket(fd.get(), src.name);
    // A fail-back whose rail went down again while connecting: nothing is committed yet.
    if (j.reason == MigrateReason::kFailBack && !railUp(rail)) {
      *err = Status(Errc::kLinkFailure, "rail " + std::to_string(rail) + " down again");
      return Attempt::kFailed;
    }
  }
  tl->pathNs = monotonicNs();
  // The peer commits as soon as the request arrives: the reply gets a deadline of its own, so a
  // connect that used up the attempt's time (SYN retransmitted after a link came back) does not
  // leave the peer on a path this end has closed (seen: both ends' communicators failed).
  Deadline dl = Deadline::afterMs(kAttemptMs);
  int raw = fd.get();
  HandshakeIo io = core::socketIo(raw, dl);
  Attempt a = handshake(c, rail, j, withHello, io, std::move(fd), nullptr, err, epochOut, resentOut, tl);
  if (a == Attempt::kFailed) *err = err->Wrap("migration handshake on rail " + std::to_string(rail));
  return a;
}

Failover::Attempt Failover::handshake(Conn& c, int rail, const Job& j, bool withHello, const HandshakeIo& io,
                                      UniqueFd fd, RelayLink* relay, Status* err, uint32_t* epochOut,
                                      uint64_t* resentOut, Timeline* tl) {
  int peer = c.peer;
  uint32_t epoch;
  MigrateRequest req;
  {
    std::lock_guard lk(c.mu);
    epoch = nextEpoch(std::max(c.highest, c.port->epoch()), c.role);
    c.highest = epoch;
    c.pending = epoch;
    c.busy.fetch_add(1);
    if (c.role == Role::kReceiver) {
      auto* rp = static_cast<channel::RecvPort*>(c.port);
      req.applied = rp->applied();
      req.received = std::max(rp->received(), req.applied);
    }
  }
  auto done = [&](Attempt a) {
    std::lock_guard lk(c.mu);
    if (c.pending == epoch) c.pending = 0;
    c.busy.fetch_sub(1);
    return a;
  };
  req.conn = c.id;
  req.initiator = c.role;
  req.reason = j.reason;
  req.rail = static_cast<uint16_t>(rail);
  req.epoch = epoch;
  req.railsUp = railsUp_.load();

  // The usual authenticated data hello (communicator, ranks; the epoch marks a migration) unless
  // the path is a standby, whose hello went at its opening; the request rides behind it.
  std::array<std::byte, kMigrateRequestBytes> out;
  encodeMigrateRequest(req, out);
  Status s;
  if (withHello) {
    auto session = core::sendAuthHello(io, dataHello(peer, c.id.channel, epoch), comm_.key_, core::AuthPurpose::kData, out);
    s = session.status();
    if (s.ok()) {
      tl->sentNs = monotonicNs();
      s = core::readProof(io, comm_.key_, *session);
    }
  } else {
    s = io.send(out);
    if (s.ok()) tl->sentNs = monotonicNs();
  }
  std::array<std::byte, kMigrateReplyBytes> rb;
  bool sent = tl->sentNs != 0;
  if (s.ok()) s = io.recv(rb);
  tl->replyNs = monotonicNs();
  if (!s.ok()) {
    // The request went out: the peer may have committed it and retired the old path under us.
    if (sent) c.handshakeUnsure.store(true);
    *err = s;
    return done(Attempt::kFailed);
  }
  auto rep = decodeMigrateReply(rb);
  if (!rep.ok()) {
    *err = rep.status();
    return done(Attempt::kFailed);
  }
  setPeerRails(peer, rep->railsUp);
  if (rep->status == MigrateStatus::kNotReady) return done(Attempt::kNotReady);
  if (rep->status != MigrateStatus::kOk) {
    {
      std::lock_guard lk(c.mu);
      c.highest = std::max(c.highest, rep->epoch);
    }
    if (rep->status == MigrateStatus::kStale) return done(Attempt::kStale);
    *err = Status(Errc::kPeerFailure, "rank " + std::to_string(peer) + " refused the migration");
    return done(Attempt::kFailed);
  }
  uint64_t resent = 0;
  {
    std::lock_guard lk(c.mu);
    // A newer proposal of the peer's may have been applied here meanwhile: it wins.
    if (epoch <= c.port->epoch()) {
      if (c.pending == epoch) c.pending = 0;
      c.busy.fetch_sub(1);
      return Attempt::kStale;
    }
    uint64_t peerReceived = c.role == Role::kSender ? rep->received : 0;
    uint64_t peerApplied = c.role == Role::kSender ? rep->applied : 0;
    auto r = commitLocked(c, std::move(fd), epoch, rail, j.reason, peerReceived, peerApplied, nullptr, relay);
    if (c.pending == epoch) c.pending = 0;
    c.busy.fetch_sub(1);
    if (!r.ok()) {
      *err = r.status();
      return Attempt::kFailed;
    }
    resent = *r;
  }
  tl->commitNs = monotonicNs();
  bytesResent_.fetch_add(resent);
  *epochOut = epoch;
  *resentOut = resent;
  return Attempt::kDone;
}

Result<uint64_t> Failover::commitLocked(Conn& c, UniqueFd fd, uint32_t epoch, int rail, MigrateReason reason,
                                        uint64_t peerReceived, uint64_t peerApplied, MigrateReply* reply,
                                        RelayLink* relay) {
  if (broken()) return Status(Errc::kAborted, "communicator failed");
  channel::PortBase* port = c.port;
  transport::SocketEngine* engine = comm_.engine_.get();
  // A passive sender's reply holds nothing that retiring the old path changes (the receiver's
  // counters came with the request): it goes first, so the initiator commits while this end
  // retires its old path, instead of after (one wait for the socket engine less on the fault's
  // path). A failed send leaves everything as it was.
  if (reply && c.role == Role::kSender) {
    reply->epoch = epoch;
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(*reply, rb);
    RECCL_TRY(transport::sendAll(fd.get(), rb, Deadline::afterMs(kAttemptMs)).Wrap("migration reply"));
    reply = nullptr;
  }
  // Retire the old path first: its I/O stops before the new path touches the same slots.
  // A receiver's old path may still be writing a step into its slot or its direct target (the
  // user's buffer, which the algorithm may already be reducing into): the engine reaps it
  // before it starts the new path (SocketEngine::replace, no wait here). A sender's old path
  // only reads slots, and after shutdown() the
  // engine thread, which drives old and new path alike, ignores its completions (acks of the
  // old epoch never count): its resend starts at once and the wait for the engine to reap the
  // old path (one or two of its loop turns, up to ~1.5 ms measured under load) comes after.
  // An old TCP path across a link that is down at either end: dropped outright (see abortTcp).
  // Only then: on a healthy link (a fail-back, a rebalance) the reset would reach the peer's
  // old path, which may not be retired yet.
  int oldFd = -1;
  if (auto* sp = dynamic_cast<transport::SocketSendPath*>(port->path()))
    oldFd = sp->fd();
  else if (auto* rp = dynamic_cast<transport::SocketRecvPath*>(port->path()))
    oldFd = rp->fd();
  int oldRail = c.rail.load();
  if (oldFd >= 0 && oldRail >= 0 && oldRail < nrails_) {
    if (!railUp(oldRail) || !((peerRails(c.peer) >> oldRail) & 1u))
      abortTcp(oldFd);
    else if (oldRail != rail && (reason == MigrateReason::kFailBack || reason == MigrateReason::kRebalance))
      railLeftNs_[oldRail].store(monotonicNs(), std::memory_order_release);  // see grayExplained
  }
  port->setEpoch(epoch);
  struct ReapLater {
    transport::SocketEngine* engine;
    transport::EnginePath* path = nullptr;
    ~ReapLater() {
      if (path) engine->remove(path);
    }
  } reapLater{engine};
  // A receiver's old engine path that a new socket path replaces is handed to the engine with
  // its successor (SocketEngine::replace): the engine starts the new path once the old one's I/O
  // has finished, on its own thread, and nobody here waits for that thread.
  transport::EnginePath* replaced = nullptr;
  if (channel::Path* old = port->path()) {
    old->shutdown();
    if (auto* ep = dynamic_cast<transport::EnginePath*>(old)) {
      if (c.role == Role::kSender)
        reapLater.path = ep;  // kept alive by the port (retired paths live as long as it)
      else if (!relay)
        replaced = ep;  // likewise
      else
        engine->remove(ep);
    }
  }
  c.highest = std::max(c.highest, epoch);
  const auto& src = comm_.myNics_[rail];
  int newFd = fd.get();
  int via = relay ? relay->via : -1;
  uint64_t resent = 0;
  if (c.role == Role::kSender) {
    auto* sp = static_cast<channel::SendPort*>(port);
    uint64_t posted = sp->posted();
    sp->onAck(peerApplied);
    // Never from below what the receiver acknowledged: those steps are applied there, and their
    // slots may already hold later steps, or be half-written by the algorithm. The receiver's
    // counters in a request can be older than its acks: an initiating receiver reads them before
    // the handshake, and on a healthy old path (a fail-back) steps and acks keep flowing until
    // this end commits (seen: a request served ~0.7 s late on a busy machine resent 24 steps
    // through 8 slots, and the allreduce went wrong).
    uint64_t resume = std::max(std::min(peerReceived, posted), sp->acked());
    // Counted from the parts, which copy nothing: frame() would copy each direct step's payload
    // into its slot first, under this lock and before the resend starts, into slot pages direct
    // sends never touched (measured: a run's first failover spent its milliseconds in those page
    // faults). A socket path sends the parts, a direct step's payload from the caller's memory; a
    // relay pipe needs whole frames and copies each on its own thread as it writes it. Either
    // reads the caller's buffer before the step's ack can reach the algorithm, since a send path
    // holds an ack until the step has left whole (SocketSendPath::heldAck_, RelaySendPath).
    for (uint64_t s = resume + 1; s <= posted; ++s) resent += sp->frameParts(s).payload.size();
    if (reply) {
      reply->epoch = epoch;
      std::array<std::byte, kMigrateReplyBytes> rb;
      encodeMigrateReply(*reply, rb);
      RECCL_TRY(transport::sendAll(newFd, rb, Deadline::afterMs(kAttemptMs)).Wrap("migration reply"));
    }
    std::string desc = "tcp " + src.name + " rank " + std::to_string(c.id.sender) + "->" +
                       std::to_string(c.id.receiver) + " ch " + std::to_string(c.id.channel) + " epoch " +
                       std::to_string(epoch);
    if (relay) {
      port->armFirstStepStamp();
      startRelayPath(c, std::move(*relay), resume, epoch, rail);
    } else {
      auto path = std::make_unique<transport::SocketSendPath>(engine, std::move(fd), sp, desc, resume);
      auto* raw = path.get();
      port->setPath(std::move(path));
      port->armFirstStepStamp();  // only a step over the new path stamps (stall end for benchmarks)
      raw->start();
    }
  } else {
    auto* rp = static_cast<channel::RecvPort*>(port);
    if (reply) {
      // The old path is shut down: only steps it was completing on the engine thread right now
      // (those already in its staging buffer) can land after these reads, and the sender's resend
      // of them is then dropped here as duplicates (exactly once holds; a few bytes more on the
      // wire). A failed reply leaves the old path shut down in the engine, as a retry expects.
      reply->applied = rp->applied();
      reply->received = std::max(rp->received(), reply->applied);
      reply->epoch = epoch;
      std::array<std::byte, kMigrateReplyBytes> rb;
      encodeMigrateReply(*reply, rb);
      RECCL_TRY(transport::sendAll(newFd, rb, Deadline::afterMs(kAttemptMs)).Wrap("migration reply"));
    }
    std::string desc = "tcp " + src.name + " rank " + std::to_string(c.id.sender) + "->" +
                       std::to_string(c.id.receiver) + " ch " + std::to_string(c.id.channel) + " epoch " +
                       std::to_string(epoch);
    if (relay) {
      port->armFirstStepStamp();
      startRelayPath(c, std::move(*relay), 0, epoch, rail);
    } else {
      auto path = std::make_unique<transport::SocketRecvPath>(engine, std::move(fd), rp, desc, 0);
      auto* raw = path.get();
      port->setPath(std::move(path));
      port->armFirstStepStamp();  // only a step over the new path stamps (stall end for benchmarks)
      if (replaced)
        engine->replace(replaced, raw);  // after the reply: the new path's first ack must follow it
      else
        raw->start();
    }
  }
  if (reapLater.path) engine->remove(std::exchange(reapLater.path, nullptr));
  if (newFd >= 0) armSocket(newFd);
  c.rail.store(rail);
  c.fd.store(newFd);
  c.relayVia.store(via);
  c.handshakeUnsure.store(false);
  return resent;
}

void Failover::handlePassive(Passive p) {
  Timeline tl;
  tl.queuedNs = p.arrivedNs;
  tl.runningNs = monotonicNs();
  std::array<std::byte, kMigrateRequestBytes> buf;
  Status s = transport::recvAll(p.fd.get(), buf, Deadline::afterMs(kPassiveReadMs));
  if (!s.ok()) {
    RECCL_WARN(kLogFailover, "rank %d: migration request from rank %d: %s", rank_, p.hello.srcRank,
               s.message().c_str());
    return;
  }
  tl.replyNs = monotonicNs();
  auto req = decodeMigrateRequest(buf);
  if (!req.ok()) {
    MigrateReply reply;
    reply.railsUp = railsUp_.load();
    reply.status = MigrateStatus::kRefused;
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(reply, rb);
    (void)transport::sendAll(p.fd.get(), rb, Deadline::afterMs(kPassiveReadMs));
    RECCL_WARN(kLogFailover, "rank %d refused a migration from rank %d: %s", rank_, p.hello.srcRank,
               req.status().message().c_str());
    return;
  }
  servePassive(std::move(p.fd), p.hello, *req, tl);
}

void Failover::servePassive(UniqueFd ufd, const core::Hello& hello, const MigrateRequest& req, Timeline tl) {
  int fd = ufd.get();
  MigrateReply reply;
  reply.railsUp = railsUp_.load();
  auto refuse = [&](MigrateStatus st, const std::string& why) {
    reply.status = st;
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(reply, rb);
    (void)transport::sendAll(fd, rb, Deadline::afterMs(kPassiveReadMs));
    if (st != MigrateStatus::kNotReady && st != MigrateStatus::kStale)
      RECCL_WARN(kLogFailover, "rank %d refused a migration from rank %d: %s", rank_, hello.srcRank, why.c_str());
  };
  // The hello (already checked for secret, communicator and ranks) and the request must agree.
  int initiator = req.initiator == Role::kSender ? req.conn.sender : req.conn.receiver;
  int other = req.initiator == Role::kSender ? req.conn.receiver : req.conn.sender;
  if (initiator != hello.srcRank || other != rank_ || req.conn.channel != hello.channel ||
      req.epoch != hello.epoch || req.conn.sender >= comm_.nranks_ || req.conn.receiver >= comm_.nranks_ ||
      req.rail >= nrails_)
    return refuse(MigrateStatus::kRefused, "request does not match its hello");
  if (broken()) return refuse(MigrateStatus::kRefused, "communicator failed");
  setPeerRails(initiator, req.railsUp);
  auto c = find(req.conn);
  if (!c) return refuse(MigrateStatus::kNotReady, "connection not set up here yet");
  if (req.reason == MigrateReason::kFailBack && !railUp(req.rail)) {
    // Not up here (down, DEGRADED, or still in its hold-down): the initiator learns it from the
    // reply's railsUp and stays where it is; this end fails back itself once the rail is up.
    reply.status = MigrateStatus::kRefused;
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(reply, rb);
    (void)transport::sendAll(fd, rb, Deadline::afterMs(kPassiveReadMs));
    RECCL_INFO(kLogFailover, "rank %d: fail-back of %s onto rail %d refused: the rail is not up here", rank_,
               connName(req.conn).c_str(), static_cast<int>(req.rail));
    return;
  }
  if (req.reason == MigrateReason::kStandby) {
    // A standby path: nothing changes now; this rank answers on it when the peer uses it.
    if (!standbyOn_) {
      // RECCL_FAILOVER_STANDBY differs between the ranks: refused quietly, the peer backs off.
      reply.status = MigrateStatus::kRefused;
      std::array<std::byte, kMigrateReplyBytes> rb;
      encodeMigrateReply(reply, rb);
      (void)transport::sendAll(fd, rb, Deadline::afterMs(kPassiveReadMs));
      return;
    }
    transport::tuneDataSocket(fd, comm_.myNics_[req.rail].name);
    reply.status = MigrateStatus::kOk;
    reply.epoch = c->port->epoch();
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(reply, rb);
    if (!transport::sendAll(fd, rb, Deadline::afterMs(kPassiveReadMs)).ok()) return;
    registerPassiveStandby(PassiveStandby{std::move(ufd), req.conn, initiator, req.rail});
    return;
  }
  uint64_t resent = 0;
  {
    std::lock_guard lk(c->mu);
    uint32_t cur = c->port->epoch();
    if (!acceptProposal(req.epoch, cur, c->pending)) {
      reply.epoch = std::max({cur, c->pending, c->highest});
      return refuse(MigrateStatus::kStale, "older epoch");
    }
    c->busy.fetch_add(1);
    transport::tuneDataSocket(fd, comm_.myNics_[req.rail].name);
    auto r = commitLocked(*c, std::move(ufd), req.epoch, req.rail, req.reason, req.received, req.applied, &reply);
    c->busy.fetch_sub(1);
    if (!r.ok()) {
      RECCL_WARN(kLogFailover, "rank %d: taking over %s failed: %s", rank_, connName(c->id).c_str(),
                 r.status().message().c_str());
      return;  // the initiator sees the handshake fail and tries again
    }
    resent = *r;
    c->passiveEpoch.store(req.epoch);
  }
  tl.commitNs = monotonicNs();
  bytesResent_.fetch_add(resent);
  Job j;
  j.id = req.conn;
  j.reason = req.reason;
  j.source = FaultSource::kPeer;
  j.fromRail = -1;
  j.toRail = req.rail;
  logMigration(*c, j, req.epoch, req.rail, resent, false, tl.commitNs, &tl);
}

void Failover::unrecoverable(Conn& c, const Status& s) {
  RECCL_WARN(kLogFailover, "%s", s.message().c_str());
  c.port->fail(s);
  comm_.breakComm(s);
}

int Failover::pickMoveRail(Conn& c, const std::vector<double>& weights) {
  std::lock_guard pk(pickMu_);
  std::vector<int> load = railLoads(c.role);
  for (auto& d : snapshot()) {
    if (d.get() == &c || d->role != c.role) continue;
    int t = d->movingTo.load();
    if (t >= 0 && t < nrails_ && t != d->rail.load()) ++load[t];
  }
  int r = pickRail(load, weights, -1);
  c.movingTo.store(r);
  return r;
}

void Failover::logMigration(const Conn& c, const Job& j, uint32_t epoch, int rail, uint64_t resent, bool initiated,
                            uint64_t commitNs, const Timeline* tl) {
  bool failBack = j.reason == MigrateReason::kFailBack;
  (failBack ? failbacks_ : failovers_).fetch_add(1);
  uint64_t migUs = j.faultNs && commitNs > j.faultNs ? (commitNs - j.faultNs) / 1000 : 0;
  if (!failBack && migUs) {
    lastFailoverUs_.store(migUs);
    lastFailoverSignalNs_.store(j.faultNs);
  }
  // Timeline, us between stamps (initiator: signal>queued>thread>path>request sent>reply>commit;
  // passive end: hello seen>thread>request read>commit); "-": not reached. With the in-process
  // detector, the queue's split: signal>detector decided>monitor read it>queued.
  char tlText[320] = "";
  if (tl) {
    auto d = [](uint64_t from, uint64_t to) -> long long {
      return from && to && to >= from ? static_cast<long long>((to - from) / 1000) : -1;
    };
    if (initiated)
      snprintf(tlText, sizeof(tlText), ", timeline us: queue %lld thread %lld %s %lld request %lld reply %lld commit %lld",
               d(tl->signalNs, tl->queuedNs), d(tl->queuedNs, tl->runningNs), tl->standby ? "standby" : "connect",
               d(tl->runningNs, tl->pathNs), d(tl->pathNs, tl->sentNs), d(tl->sentNs, tl->replyNs),
               d(tl->replyNs, tl->commitNs));
    if (initiated && tl->emitNs) {
      size_t n = strlen(tlText);
      snprintf(tlText + n, sizeof(tlText) - n, " (queue: detector %lld monitor wake %lld monitor %lld)",
               d(tl->signalNs, tl->emitNs), d(tl->emitNs, tl->seenNs), d(tl->seenNs, tl->queuedNs));
    }
    if (!initiated)
      snprintf(tlText, sizeof(tlText), ", timeline us: thread %lld request %lld commit %lld",
               d(tl->queuedNs, tl->runningNs), d(tl->runningNs, tl->replyNs), d(tl->replyNs, tl->commitNs));
  }
  RECCL_WARN(kLogFailover,
             "rank %d: %s %s %s -> rail %d (%s) epoch %u: reason %s, source %s, fault-to-switch %" PRIu64
             " us, resent %" PRIu64 " bytes%s",
             rank_, failBack ? "fail-back" : "failover", initiated ? "of" : "by peer of", connName(c.id).c_str(), rail,
             comm_.myNics_[rail].name.c_str(), epoch, reasonName(j.reason), faultSourceName(j.source), migUs, resent,
             tlText);
}

}  // namespace reccl::failover
