// The transport-specific carrier under one directed connection: a TCP connection bound to a NIC,
// or a shared-memory ring. A port owns its Path; failover replaces it (SendPort::setPath) and
// resends from the receiver's applied step + 1 without the algorithm noticing.
#pragma once

#include <string>

namespace reccl::channel {

class Path {
 public:
  virtual ~Path() = default;
  // The sender posted new steps into its slots: start moving them.
  virtual void notifyPosted() noexcept = 0;
  // The receiver applied steps: acknowledge them so the sender can reuse the slots.
  virtual void notifyConsumed() noexcept = 0;
  // Stops the path's I/O at once (the peer sees the connection close); thread-safe.
  virtual void shutdown() noexcept {}
  // Sends what the path holds back (batched acks) without waiting for more; true once nothing
  // is held back. Thread-safe; a communicator calls it before it closes, since its peers wait
  // for those acks.
  virtual bool flush() noexcept { return true; }
  // Whether a sender path sends each step as header + payload pieces (SendPort::frameParts), so
  // that a step's payload may stay in the caller's memory (SendPort::postDirect).
  virtual bool sendsParts() const noexcept { return false; }
  // "tcp rail0 10.0.0.1->10.0.0.2" style, for logs.
  virtual std::string describe() const = 0;
};

}  // namespace reccl::channel
