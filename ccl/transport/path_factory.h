// How failover gets paths from a transport without knowing which transport it is. One factory per
// communicator and transport (TcpPathFactory today, the verbs transport next): failover asks it
// for a link to a peer on a rail, runs the migration handshake over the link's byte stream, and
// makes the link the port's path; it never opens a socket or a QP itself (docs/architecture.md,
// "Paths and their transports").
//
// A Link is one connection end's possible next path: a target the initiator connected, one the
// data listener accepted (proved by the communicator's key: core/handshake.h), or an idle standby.
// Its life: connect()/accept() -> the handshake on io() (hello and migration request, reply; with
// the transport's records in between, see sendRecord) -> makePath() (the link is used up) or
// destruction (closed). The retirement of the path it replaces is the old path's own business
// (channel::Path: abandon, shutdown, drain, handOver).
//
// Threads: a factory is safe from any thread; a Link belongs to the thread that holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "channel/path.h"
#include "channel/port.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "transport/byte_io.h"

namespace reccl::transport {

// The connection end a link is (or will be) for, as the transport's record needs it.
struct LinkEnd {
  channel::PortBase* port = nullptr;
  bool isSender = false;
  int rail = -1;
  uint32_t epoch = 0;  // the epoch proposed for the new path
  // The records are exchanged to open an idle standby, not to commit a move: neither end retires
  // anything for it (a verbs receiver that initiated a commit shuts its old path down here).
  bool standbyOpening = false;
};

class Link {
 public:
  virtual ~Link() = default;  // an unused link is closed (a FIN on TCP)

  // The handshake's byte stream, with `deadline` bound in.
  virtual ByteIo io(Deadline deadline) = 0;
  // The transport's connection record, when it has one (a verbs QP's number, PSN, GID and ring
  // keys: docs/verbs.md, "The connection record"): sent right after the migration request (the
  // initiator) or reply (the passive end), and the peer's read right after the reply (the
  // initiator) or request (the passive end), so that both ends' paths can connect before
  // anything is written. TCP has none: nothing goes on the wire.
  // A link whose records were exchanged already (a standby, at its opening) exchanges none.
  virtual Status sendRecord(const ByteIo& io, const LinkEnd& end) { return Status::Ok(); }
  virtual Status takePeerRecord(const ByteIo& io, const LinkEnd& end) { return Status::Ok(); }

  // An idle standby: its own liveness probes (nothing in flight would show its death), a look at
  // whether it is still usable (nothing pending: no data, close or error), the descriptor that
  // turns readable when the peer sends a request on it or closes it, whether something is there
  // to read, and closing it at once without a goodbye (on a dead link a goodbye would be
  // retransmitted for seconds).
  virtual void keepIdle() noexcept {}
  virtual bool alive() const noexcept = 0;
  virtual int waitFd() const noexcept = 0;
  // Without waiting: a request, a close or an error is there to be read.
  virtual bool hasInput() const noexcept = 0;
  virtual void closeNow() noexcept = 0;

  // The channel path of `port` over this link (the link is used up; the path is not started).
  // A sender path sends the steps after `after` (a migration resends from the receiver's step);
  // a receiver path acknowledges the applied step at once when `after` is 0 (the acks in flight
  // on the old path may be lost).
  virtual std::unique_ptr<channel::Path> makePath(channel::PortBase& port, bool isSender, uint64_t after,
                                                  std::string desc) = 0;

  // A link that forwards bytes (a relay pipe) needs a byte-stream path at the peer whatever the
  // peer's transport: the initiator's request says so (MigrateRequest::streamPath) and the peer
  // keeps the link its data listener accepted (PathFactory::acceptStream) as it is.
  virtual bool needsStreamPeer() const noexcept { return false; }
  // The transport of the path makePath() makes, as a path's description names it; nullptr: the
  // communicator's (its factory's name()).
  virtual const char* transport() const noexcept { return nullptr; }
};

// What failover watches on a path (stall check, rail meter).
struct PathSample {
  bool known = false;    // false: not a path of this factory (a relay pipe), nothing to say
  bool stalled = false;  // something outstanding and no answer from the peer for the stall time
  uint32_t quietMs = 0;  // since the peer's last answer (an ack)
  uint64_t bytes = 0;    // moved so far on this path, both directions
  uint64_t pathId = 0;   // the transport connection under it (a migrated path has a new one)
};

// What a path's transport counted of lost segments (failover/health/peer_loss.h: whose retransmits
// a held gray failure's are). Cumulative over the transport connection under the path.
struct LossSample {
  bool known = false;   // false: the transport keeps no such count (a QP), or not a path of this factory
  uint64_t lost = 0;    // TCP: retransmitted, less those the receiver reported as duplicates (D-SACK)
  uint64_t sent = 0;    // TCP: data segments sent, retransmits included
  uint64_t pathId = 0;  // the transport connection (PathSample::pathId)
};

class PathFactory {
 public:
  virtual ~PathFactory() = default;
  // "tcp", "verbs": the first word of a path's description and of its log lines.
  virtual const char* name() const noexcept = 0;

  // Initiator: a link from this rank's NIC on `rail` to `peer`'s NIC on the same rail (rails are
  // separate switches). Nothing is sent on it yet. Errc::kPeerFailure: the peer refused it
  // (nothing listens there: its process exited or its communicator is gone).
  virtual Result<std::unique_ptr<Link>> connect(int peer, int rail, Deadline deadline) = 0;
  // Passive end: the link of a connection the data listener accepted and proved, with the
  // migration request still to be read.
  virtual std::unique_ptr<Link> accept(UniqueFd fd) = 0;
  // Passive end, in two steps, when the request decides the link's kind: the accepted connection
  // as a byte-stream link (the request is read on it), then adopt() makes it this transport's
  // link unless the request asked for a byte-stream path. A transport whose links are byte
  // streams (TCP) has nothing to adopt. accept(fd) is adopt(acceptStream(fd)).
  virtual std::unique_ptr<Link> acceptStream(UniqueFd fd) { return accept(std::move(fd)); }
  virtual std::unique_ptr<Link> adopt(std::unique_ptr<Link> stream) { return stream; }

  // The rail whose NIC `path` leaves from (-1: not a path of this factory, or not known). These
  // three take any path this factory's links made, byte-stream ones included.
  virtual int railOf(const channel::Path& path) const = 0;
  // Failover watches `path` (a data path it may move): arms what makes an idle path's death
  // visible to sample() within about `stallMs` (TCP: keepalive probes). Without failover nothing
  // is armed, and a path fault fails the communicator.
  virtual void watch(const channel::Path& path, int64_t stallMs) const = 0;
  virtual PathSample sample(const channel::Path& path, int64_t stallMs) const = 0;
  // Reads counters only (sample() may post a probe).
  virtual LossSample loss(const channel::Path& path) const {
    (void)path;
    return {};
  }
  // Stops what the transport runs on its own (a progress thread, a reaper): after failover
  // stopped, before the ports and their paths go. Idempotent.
  virtual void stop() noexcept {}
};

}  // namespace reccl::transport
