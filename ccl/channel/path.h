// The transport-specific carrier under one directed connection: a TCP connection bound to a NIC,
// a shared-memory ring, a relay pipe, an RDMA QP. A port owns its Path; failover replaces it
// (PortBase::setPath) and resends from the receiver's step without the algorithm noticing.
//
// Life of a path: made (by a transport's factory or the communicator), published in its port,
// start(); when replaced: abandon() if the link under it is dead, shutdown(), then either
// handOver(successor) or drain() before the successor starts (a receiver's successor must not
// write into the slots while this path may still do so). The port keeps it until the port goes.
#pragma once

#include <atomic>
#include <string>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"

namespace reccl::channel {

class Path {
 public:
  virtual ~Path() = default;
  // The sender posted new steps into its slots: start moving them.
  virtual void notifyPosted() noexcept = 0;
  // The receiver applied steps: acknowledge them so the sender can reuse the slots.
  virtual void notifyConsumed() noexcept = 0;
  // Starts moving steps (after the port published the path).
  virtual void start() {}
  // Stops the path's I/O at once (the peer sees the connection close); thread-safe.
  virtual void shutdown() noexcept {}
  // The link under the path is dead: drop its connection on the spot, so that the transport stops
  // retransmitting what it held (before shutdown()). Transports without such a state do nothing.
  virtual void abandon() noexcept {}
  // After shutdown(): returns once the path's I/O no longer touches the port's memory (it left
  // its progress engine). Never from the thread that drives the path.
  virtual void drain() noexcept {}
  // After shutdown(), at a receiver, before the peer may write over the successor: returns once
  // nothing this path's transport already took in can still land in the port's memory (RDMA: a
  // packet of an old write that the NIC was executing; the QP's receive queue flushed). Takes the
  // path out of its progress engine. Transports whose data lands only through the engine's
  // thread (sockets, relay pipes) have nothing to wait for: handOver()/drain() order them.
  // kTimeout at the deadline (the path stays shut down; a retry may call it again).
  virtual Status stopLanding(Deadline) { return Status::Ok(); }
  // After shutdown(): starts `next` once this path has drained, without waiting for that here
  // (the engine that drives both does it). False when it cannot: the caller drains and starts.
  virtual bool handOver(Path& next) noexcept { return false; }
  // Sends what the path holds back (batched acks) without waiting for more; true once nothing
  // is held back. Thread-safe; a communicator calls it before it closes, since its peers wait
  // for those acks.
  virtual bool flush() noexcept { return true; }
  // Whether a sender path sends each step as header + payload pieces (SendPort::frameParts), so
  // that a step's payload may stay in the caller's memory (SendPort::postDirect).
  virtual bool sendsParts() const noexcept { return false; }
  // "tcp rail0 10.0.0.1->10.0.0.2" style, for logs.
  virtual std::string describe() const = 0;

  // Whether a step or an ack of the port's current epoch arrived over this path: the peer sends
  // on it, so it took the path into use. Failover reads the close of such a path as the peer's
  // (its process or communicator ended), never as a migration handshake the peer gave up on,
  // whose new path the peer never used. Set by the transports, read by any thread.
  bool heard() const noexcept { return heard_.load(std::memory_order_relaxed); }
  void markHeard() noexcept {
    if (!heard_.load(std::memory_order_relaxed)) heard_.store(true, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> heard_{false};
};

}  // namespace reccl::channel
