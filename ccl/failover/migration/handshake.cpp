// The migration handshake on a new link, at both ends. The initiator sends the usual
// authenticated data hello (communicator, ranks, a migration epoch) with its MigrateRequest right
// behind it (a standby's hello went when it was opened: the request alone), then its transport
// record; it reads the reply and the peer's record and commits. The passive end reads the request
// (after the data listener proved the hello, or on a standby), checks it against the hello and
// its own state, and commits on the spot, its reply on the new link.
#include <algorithm>
#include <array>

#include "core/handshake.h"
#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/monitor.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {
constexpr int64_t kPassiveReadMs = 1000;  // the request follows the hello at once
}  // namespace

core::Hello dataHello(const FailoverContext& ctx, int dstRank, uint32_t channel, uint32_t epoch) {
  core::Hello h;
  h.kind = core::HelloKind::kTcpData;
  h.commId = ctx.host.commId();
  h.srcRank = ctx.cfg.rank;
  h.dstRank = dstRank;
  h.nranks = ctx.host.nranks();
  h.channel = channel;
  h.epoch = epoch;
  return h;
}

void fillRequest(MigrateRequest* req, const FailoverContext& ctx, const Conn& c, MigrateReason reason, int rail,
                 uint32_t epoch) {
  req->conn = c.id;
  req->initiator = c.role;
  req->reason = reason;
  req->rail = static_cast<uint16_t>(rail);
  req->epoch = epoch;
  req->railsUp = ctx.rails.upMask();
}

Attempt Migration::handshake(Conn& c, int rail, const Job& j, bool withHello, std::unique_ptr<transport::Link> link,
                             int via, Deadline deadline, Status* err, Moved* moved, Timeline* tl) {
  uint32_t epoch = 0;
  Attempt a = propose(c, rail, j, withHello, *link, deadline, true, &epoch, err, tl);
  if (a != Attempt::kDone) return a;
  return conclude(c, rail, j, std::move(link), via, epoch, deadline, err, moved, tl);
}

Attempt Migration::release(Conn& c, uint32_t epoch, Attempt a) {
  std::lock_guard lk(c.mu);
  if (c.pending == epoch) c.pending = 0;
  c.busy.fetch_sub(1);
  return a;
}

Attempt Migration::propose(Conn& c, int rail, const Job& j, bool withHello, transport::Link& link, Deadline deadline,
                           bool mayWait, uint32_t* epochOut, Status* err, Timeline* tl) {
  uint32_t epoch;
  MigrateRequest req;
  {
    std::unique_lock lk(c.mu, std::defer_lock);
    if (mayWait) lk.lock();
    else if (!lk.try_lock()) return Attempt::kNotReady;
    // A commit that ran meanwhile (a passive one, under this lock) replaced the failed path.
    if (j.ifPath && c.port->path() != j.ifPath) return Attempt::kStale;
    if (!mayWait && jobMoot(j, c.port->path(), c.rail.load())) return Attempt::kStale;
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
  fillRequest(&req, ctx_, c, j.reason, rail, epoch);
  req.streamPath = link.needsStreamPeer();

  // The usual authenticated data hello (communicator, ranks; the epoch marks a migration) unless
  // the path is a standby, whose hello went at its opening; the request rides behind it.
  std::array<std::byte, kMigrateRequestBytes> out;
  encodeMigrateRequest(req, out);
  const transport::LinkEnd end{c.port, c.role == Role::kSender, rail, epoch};
  transport::ByteIo io = link.io(deadline);
  const core::Key& key = ctx_.host.key();
  Status s;
  if (withHello) {
    auto session =
        core::sendAuthHello(io, dataHello(ctx_, c.peer, c.id.channel, epoch), key, core::AuthPurpose::kData, out);
    s = session.status();
    if (s.ok()) {
      tl->sentNs = monotonicNs();
      s = link.sendRecord(io, end);
      if (s.ok()) s = core::readProof(io, key, *session);
    }
  } else {
    s = io.send(out);
    if (s.ok()) {
      tl->sentNs = monotonicNs();
      s = link.sendRecord(io, end);
    }
  }
  if (!s.ok()) {
    // The request went out: the peer may have committed it and retired the old path under us.
    if (tl->sentNs != 0) c.handshakeUnsure.store(true);
    *err = s;
    return release(c, epoch, Attempt::kFailed);
  }
  *epochOut = epoch;
  return Attempt::kDone;
}

Attempt Migration::conclude(Conn& c, int rail, const Job& j, std::unique_ptr<transport::Link> link, int via,
                            uint32_t epoch, Deadline deadline, Status* err, Moved* moved, Timeline* tl,
                            std::vector<channel::Path*>* drainLater) {
  const int peer = c.peer;
  const transport::LinkEnd end{c.port, c.role == Role::kSender, rail, epoch};
  transport::ByteIo io = link->io(deadline);
  std::array<std::byte, kMigrateReplyBytes> rb;
  Status s = io.recv(rb);
  tl->replyNs = monotonicNs();
  if (!s.ok()) {
    c.handshakeUnsure.store(true);  // the peer may have committed the request it read
    *err = s;
    return release(c, epoch, Attempt::kFailed);
  }
  auto rep = decodeMigrateReply(rb);
  if (!rep.ok()) {
    *err = rep.status();
    return release(c, epoch, Attempt::kFailed);
  }
  ctx_.monitor->peerReported(peer, rep->railsUp);
  if (rep->status == MigrateStatus::kNotReady) return release(c, epoch, Attempt::kNotReady);
  if (rep->status == MigrateStatus::kPeerFailed) {
    *err = Status(Errc::kPeerFailure, "rank " + std::to_string(peer) + "'s communicator has failed (it refused the move of " +
                                          connName(c.id) + ")");
    return release(c, epoch, Attempt::kPeerFailed);
  }
  if (rep->status != MigrateStatus::kOk) {
    {
      std::lock_guard lk(c.mu);
      c.highest = std::max(c.highest, rep->epoch);
    }
    if (rep->status == MigrateStatus::kStale) return release(c, epoch, Attempt::kStale);
    *err = Status(Errc::kPeerFailure, "rank " + std::to_string(peer) + " refused the migration");
    return release(c, epoch, Attempt::kFailed);
  }
  if (Status r = link->takePeerRecord(io, end); !r.ok()) {
    c.handshakeUnsure.store(true);  // the peer committed: it may close the path we still use
    *err = r;
    return release(c, epoch, Attempt::kFailed);
  }
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
    auto r = commit(c, std::move(link), epoch, rail, via, j.reason, peerReceived, peerApplied, nullptr, drainLater);
    if (c.pending == epoch) c.pending = 0;
    c.busy.fetch_sub(1);
    if (!r.ok()) {
      *err = r.status();
      return Attempt::kFailed;
    }
    *moved = *r;
  }
  tl->commitNs = monotonicNs();
  ctx_.counters.bytesResent.fetch_add(moved->resent);
  return Attempt::kDone;
}

void Migration::handlePassive(PassiveHello p) {
  Timeline tl;
  tl.queuedNs = p.arrivedNs;
  tl.runningNs = monotonicNs();
  // Read as a byte stream: the request says whether this end keeps it so (the peer's end is a
  // relay pipe) or makes it a link of the communicator's transport.
  std::unique_ptr<transport::Link> link = ctx_.paths.acceptStream(std::move(p.fd));
  std::array<std::byte, kMigrateRequestBytes> buf;
  Status s = link->io(Deadline::afterMs(kPassiveReadMs)).recv(buf);
  if (!s.ok()) {
    RECCL_WARN(kLogFailover, "rank %d: migration request from rank %d: %s", ctx_.cfg.rank, p.hello.srcRank,
               s.message().c_str());
    return;
  }
  tl.replyNs = monotonicNs();
  auto req = decodeMigrateRequest(buf);
  if (!req.ok()) {
    MigrateReply reply;
    reply.railsUp = ctx_.rails.upMask();
    reply.status = MigrateStatus::kRefused;
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(reply, rb);
    (void)link->io(Deadline::afterMs(kPassiveReadMs)).send(rb);
    RECCL_WARN(kLogFailover, "rank %d refused a migration from rank %d: %s", ctx_.cfg.rank, p.hello.srcRank,
               req.status().message().c_str());
    return;
  }
  if (!req->streamPath) link = ctx_.paths.adopt(std::move(link));
  servePassive(std::move(link), p.hello, *req, tl);
}

void Migration::servePassive(std::unique_ptr<transport::Link> link, const core::Hello& hello,
                             const MigrateRequest& req, Timeline tl) {
  const int rank = ctx_.cfg.rank;
  MigrateReply reply;
  reply.railsUp = ctx_.rails.upMask();
  auto send = [&](const MigrateReply& r) {
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(r, rb);
    return link->io(Deadline::afterMs(kPassiveReadMs)).send(rb);
  };
  auto refuse = [&](MigrateStatus st, const std::string& why) {
    reply.status = st;
    (void)send(reply);
    if (st != MigrateStatus::kNotReady && st != MigrateStatus::kStale)
      RECCL_WARN(kLogFailover, "rank %d refused a migration from rank %d: %s", rank, hello.srcRank, why.c_str());
  };
  // The hello (already checked for secret, communicator and ranks) and the request must agree.
  int initiator = req.initiator == Role::kSender ? req.conn.sender : req.conn.receiver;
  int other = req.initiator == Role::kSender ? req.conn.receiver : req.conn.sender;
  const int nranks = ctx_.host.nranks();
  if (initiator != hello.srcRank || other != rank || req.conn.channel != hello.channel ||
      req.epoch != hello.epoch || req.conn.sender >= nranks || req.conn.receiver >= nranks ||
      req.rail >= ctx_.cfg.nrails)
    return refuse(MigrateStatus::kRefused, "request does not match its hello");
  if (ctx_.broken()) return refuse(MigrateStatus::kPeerFailed, "communicator failed");
  ctx_.monitor->peerReported(initiator, req.railsUp);
  auto c = ctx_.conns.find(req.conn);
  if (!c) return refuse(MigrateStatus::kNotReady, "connection not set up here yet");
  if (req.reason == MigrateReason::kFailBack && !ctx_.rails.up(req.rail)) {
    // Not up here (down, DEGRADED, or still in its hold-down): the initiator learns it from the
    // reply's railsUp and stays where it is; this end fails back itself once the rail is up.
    reply.status = MigrateStatus::kRefused;
    (void)send(reply);
    RECCL_INFO(kLogFailover, "rank %d: fail-back of %s onto rail %d refused: the rail is not up here", rank,
               connName(req.conn).c_str(), static_cast<int>(req.rail));
    return;
  }
  if (req.reason == MigrateReason::kStandby) {
    // A standby path: nothing changes now; this rank answers on it when the peer uses it.
    if (!ctx_.cfg.standbyOn) {
      // RECCL_FAILOVER_STANDBY differs between the ranks: refused quietly, the peer backs off.
      reply.status = MigrateStatus::kRefused;
      (void)send(reply);
      return;
    }
    const transport::LinkEnd end{c->port, c->role == Role::kSender, req.rail, req.epoch, true};
    transport::ByteIo io = link->io(Deadline::afterMs(kPassiveReadMs));
    if (!link->takePeerRecord(io, end).ok()) return;
    reply.status = MigrateStatus::kOk;
    reply.epoch = c->port->epoch();
    if (!send(reply).ok() || !link->sendRecord(io, end).ok()) return;
    ctx_.standbys->registerPassive(std::move(link), req.conn, initiator, req.rail);
    return;
  }
  Moved moved;
  {
    std::lock_guard lk(c->mu);
    uint32_t cur = c->port->epoch();
    if (!acceptProposal(req.epoch, cur, c->pending)) {
      reply.epoch = std::max({cur, c->pending, c->highest});
      return refuse(MigrateStatus::kStale, "older epoch");
    }
    c->busy.fetch_add(1);
    const transport::LinkEnd end{c->port, c->role == Role::kSender, req.rail, req.epoch};
    Status rec = link->takePeerRecord(link->io(Deadline::afterMs(kPassiveReadMs)), end);
    tl.pathNs = monotonicNs();
    auto r = rec.ok() ? commit(*c, std::move(link), req.epoch, req.rail, -1, req.reason, req.received, req.applied, &reply)
                      : Result<Moved>(rec);
    // Before `busy` drops: the path-failure hook reads both without this lock, and a close of
    // the new path must find it marked as accepted from the peer.
    if (r.ok()) c->passiveEpoch.store(req.epoch);
    c->busy.fetch_sub(1);
    if (!r.ok()) {
      RECCL_WARN(kLogFailover, "rank %d: taking over %s failed: %s", rank, connName(c->id).c_str(),
                 r.status().message().c_str());
      return;  // the initiator sees the handshake fail and tries again
    }
    moved = *r;
  }
  tl.commitNs = monotonicNs();
  tl.sentNs = moved.replySentNs;
  ctx_.counters.bytesResent.fetch_add(moved.resent);
  const Job j{.id = req.conn, .reason = req.reason, .source = FaultSource::kPeer, .fromRail = -1, .toRail = req.rail};
  log(*c, j, moved, req.rail, false, tl.commitNs, &tl);
}

}  // namespace reccl::failover
