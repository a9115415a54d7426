// The switch of a port to its new path, and the resend: the old path retired first (its I/O stops
// before the new path touches the same slots), the new one made from the link, the sender's
// unacknowledged steps resent from its slots from the receiver's step on.
#include <algorithm>
#include <array>
#include <string>

#include "failover/context.h"
#include "failover/migration/migration.h"

namespace reccl::failover {
namespace {
constexpr int64_t kReplyMs = 1000;  // the reply's own deadline on the new link
// How long an old receive path may take to let nothing more land (an RDMA receive queue's flush:
// the driver's work after the move to ERR; docs/results/verbs-lab.md has the lab's figures).
constexpr int64_t kQuiesceMs = 2000;
}  // namespace

Result<Moved> Migration::commit(Conn& c, std::unique_ptr<transport::Link> link, uint32_t epoch, int rail, int via,
                                MigrateReason reason, uint64_t peerReceived, uint64_t peerApplied,
                                MigrateReply* reply, std::vector<channel::Path*>* drainLater) {
  if (ctx_.broken()) return Status(Errc::kAborted, "communicator failed");
  channel::PortBase* port = c.port;
  // The reply, then this end's transport record, on the new link.
  auto sendReply = [&](MigrateReply& r) -> Status {
    std::array<std::byte, kMigrateReplyBytes> rb;
    encodeMigrateReply(r, rb);
    transport::ByteIo io = link->io(Deadline::afterMs(kReplyMs));
    RECCL_TRY(io.send(rb).Wrap("migration reply"));
    return link->sendRecord(io, transport::LinkEnd{port, c.role == Role::kSender, rail, epoch});
  };
  // A passive sender's reply holds nothing that retiring the old path changes (the receiver's
  // counters came with the request): it goes first, so the initiator commits while this end
  // retires its old path, instead of after (one wait for the progress engine less on the fault's
  // path). A failed send leaves everything as it was.
  Moved moved;
  if (reply && c.role == Role::kSender) {
    reply->epoch = epoch;
    RECCL_TRY(sendReply(*reply));
    moved.replySentNs = monotonicNs();
    reply = nullptr;
  }
  moved.epoch = epoch;
  moved.fromRail = c.rail.load();
  // Retire the old path first: its I/O stops before the new path touches the same slots.
  // A receiver's old path may still be writing a step into its slot or its direct target (the
  // user's buffer, which the algorithm may already be reducing into): it hands the new path over
  // to its engine, which starts it once the old one's I/O is done (Path::handOver, no wait here),
  // or is drained first. A sender's old path only reads slots, and after shutdown() the engine
  // thread, which drives old and new path alike, ignores its completions (acks of the old epoch
  // never count): its resend starts at once and the wait for the engine to reap the old path (one
  // or two of its loop turns, milliseconds on a loaded machine) comes after.
  // An old path across a link that is down at either end is abandoned outright (TCP: reset, so
  // nothing is retransmitted on the dead link). Only then: on a healthy link (a fail-back, a
  // rebalance) the reset would reach the peer's old path, which may not be retired yet.
  channel::Path* old = port->path();
  const int oldRail = moved.fromRail;
  if (old && c.relayVia.load() < 0 && oldRail >= 0 && oldRail < ctx_.cfg.nrails) {
    if (!ctx_.rails.up(oldRail) || !((ctx_.rails.peerRails(c.peer) >> oldRail) & 1u))
      old->abandon();
    else if (oldRail != rail && (reason == MigrateReason::kFailBack || reason == MigrateReason::kRebalance))
      ctx_.rails.markLeft(oldRail, monotonicNs());  // see gray.h
  }
  if (old) {
    old->shutdown();
    c.retiredNs.store(monotonicNs());
    c.retired.store(old);
  }
  // A receiver's old path must let nothing more land before the sender may write over the new
  // one (Path::stopLanding; an initiating receiver's transport did it before its ready byte). A
  // failure leaves the old path shut down, as a retry expects, the epoch as it was, and sends no
  // reply.
  if (old && c.role == Role::kReceiver) {
    const uint64_t t0 = monotonicNs();
    RECCL_TRY(old->stopLanding(Deadline::afterMs(kQuiesceMs)).Wrap("retiring the old path of " + connName(c.id)));
    moved.quiescedNs = monotonicNs() - t0;
  }
  // Only once the old path is shut down: until then its thread may still be handing over steps
  // it holds (an RDMA receive path, completions already queued), and under the new epoch it
  // would drop them as stale and then see a gap in the steps after them.
  port->setEpoch(epoch);
  c.highest = std::max(c.highest, epoch);
  const std::string desc =
      (via >= 0 ? "relay via rank " + std::to_string(via) + " rail " + std::to_string(rail)
                : std::string(link->transport() ? link->transport() : ctx_.paths.name()) + " " + ctx_.nicName(rail)) +
      " " + connName(c.id) + " epoch " + std::to_string(epoch);
  channel::Path* raw = nullptr;
  const bool awayFromFault = isMoveAwayFromFault(reason);
  if (c.role == Role::kSender) {
    auto* sp = static_cast<channel::SendPort*>(port);
    uint64_t posted = sp->posted();
    sp->onAck(peerApplied);
    // Never from below what the receiver acknowledged: those steps are applied there, and their
    // slots may already hold later steps, or be half-written by the algorithm. The receiver's
    // counters in a request can be older than its acks: an initiating receiver reads them before
    // the handshake, and on a healthy old path (a fail-back) steps and acks keep flowing until
    // this end commits; resending from such a stale step would send slots that already hold
    // later steps as the steps they held before.
    uint64_t resume = std::max(std::min(peerReceived, posted), sp->acked());
    moved.step = resume;
    // Counted from the parts, which copy nothing: frame() would copy each direct step's payload
    // into its slot first, under this lock and before the resend starts, into slot pages direct
    // sends never touched: first-touch page faults under this lock, milliseconds at a
    // connection's first failover. A socket path sends the parts, a direct step's payload from
    // the caller's memory; a relay pipe needs whole frames and copies each on its own thread as
    // it writes it. Either reads the caller's buffer before the step's ack can reach the
    // algorithm, since a send path holds an ack until the step has left whole
    // (SocketSendPath::heldAck_, RelaySendPath).
    for (uint64_t s = resume + 1; s <= posted; ++s) moved.resent += sp->frameParts(s).payload.size();
    auto path = link->makePath(*port, true, resume, desc);
    raw = path.get();
    port->setPath(std::move(path));
    port->armFirstStepStamp(awayFromFault);  // only a step over the new path stamps (stall end for benchmarks)
    raw->start();
    if (old && drainLater) drainLater->push_back(old);
    else if (old) old->drain();
  } else {
    auto* rp = static_cast<channel::RecvPort*>(port);
    moved.step = rp->received();
    if (reply) {
      // The old path is shut down: only steps it was completing on its engine's thread right now
      // (those already in its staging buffer) can land after these reads, and the sender's resend
      // of them is then dropped here as duplicates (exactly once holds; a few bytes more on the
      // wire). A failed reply leaves the old path shut down in the engine, as a retry expects.
      reply->applied = rp->applied();
      reply->received = std::max(rp->received(), reply->applied);
      reply->epoch = epoch;
      RECCL_TRY(sendReply(*reply));
      moved.replySentNs = monotonicNs();
    }
    auto path = link->makePath(*port, false, 0, desc);
    raw = path.get();
    port->setPath(std::move(path));
    port->armFirstStepStamp(awayFromFault);  // only a step over the new path stamps (stall end for benchmarks)
    // After the reply: the new path's first ack must follow it.
    if (!old || !old->handOver(*raw)) {
      if (old) old->drain();
      raw->start();
    }
  }
  ctx_.paths.watch(*raw, ctx_.cfg.stallMs);
  c.rail.store(rail);
  c.relayVia.store(via);
  c.handshakeUnsure.store(false);
  return moved;
}

}  // namespace reccl::failover
