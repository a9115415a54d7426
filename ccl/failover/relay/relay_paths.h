// The origin's end of a relayed connection: a Path that moves step frames and acks through the
// shared-memory pipe to the same-host relay rank instead of a socket. Same byte stream as the TCP
// paths (transport/socket_paths.h): frames [step header | payload] one way, 24-byte acks the
// other, so epochs, duplicate drops and resends behave exactly as on a direct connection.
//
// One thread per path: it sleeps on the pipe's origin eventfd (rung by the relay and by
// notifyPosted/notifyConsumed) and on the control socket (the relay's end closes when the relay
// process dies). A broken pipe is reported as a link failure, so failover migrates the
// connection again (direct, or through another relay).
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <thread>

#include "channel/path.h"
#include "channel/port.h"
#include "channel/recv_framing.h"
#include "channel/step_header.h"
#include "failover/relay/relay_pipe.h"
#include "reccl/common/unique_fd.h"

namespace reccl::failover {

// What the migration hands a relay path: the pipe, the control socket to the relay, who relays.
struct RelayLink {
  RelayPipe pipe;
  UniqueFd ctrl;
  int via = -1;  // the relay rank
};

class RelayPathBase : public channel::Path {
 public:
  ~RelayPathBase() override;
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override;
  // Starts the thread (after the port published this path).
  void start() override;

 protected:
  RelayPathBase(RelayLink link, channel::PortBase* port, std::string desc, bool isSender);
  // One round of work; true when something moved.
  virtual bool progress() = 0;
  void failed(const Status& s);
  void run();
  // shutdown() and join: derived destructors call it before their members go.
  void stop() noexcept;

  RelayLink link_;
  channel::PortBase* base_;
  std::string desc_;
  bool isSender_;
  std::atomic<bool> dead_{false};
  std::thread thread_;
};

class RelaySendPath final : public RelayPathBase {
 public:
  // Sends steps after `sentBefore` (the receiver's received step after a migration).
  RelaySendPath(RelayLink link, channel::SendPort* port, std::string desc, uint64_t sentBefore);
  ~RelaySendPath() override { stop(); }
  void notifyPosted() noexcept override { link_.pipe.wakeOrigin(); }
  void notifyConsumed() noexcept override {}

 private:
  bool progress() override;
  channel::SendPort* port_;
  uint64_t sent_;
  size_t partial_ = 0;  // bytes of step sent_+1 already written
  // Step sent_+1's header as this path writes it: the port's with this path's epoch (a path
  // never writes the port's slots, which its successor reads).
  std::array<std::byte, channel::kStepHeaderBytes> header_{};
  uint64_t heldAck_ = 0;  // the receiver's latest ack; the port sees min(heldAck_, sent_)
  std::array<std::byte, channel::kAckFrameBytes> ack_{};
};

class RelayRecvPath final : public RelayPathBase {
 public:
  // Acknowledges the applied step at once (acks in flight on the old path may be lost).
  RelayRecvPath(RelayLink link, channel::RecvPort* port, std::string desc);
  ~RelayRecvPath() override { stop(); }
  void notifyPosted() noexcept override {}
  void notifyConsumed() noexcept override { link_.pipe.wakeOrigin(); }

 private:
  using Phase = channel::StepInHand::Phase;
  bool progress() override;
  bool onHeader();
  channel::RecvPort* port_;
  channel::StepInHand in_;  // the step being read (channel/recv_framing.h)
  std::array<std::byte, channel::kStepHeaderBytes> hdr_{};
  uint64_t acked_ = 0;
  std::array<std::byte, channel::kAckFrameBytes> ackOut_{};
  size_t ackOff_ = channel::kAckFrameBytes;  // bytes of ackOut_ already written (all: none pending)
};

}  // namespace reccl::failover
