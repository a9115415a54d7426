// TCP paths under the two ends of a directed connection, driven by the SocketEngine.
// Data flows sender -> receiver as [step header | payload]; acks flow back on the same socket.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "channel/path.h"
#include "channel/port.h"
#include "channel/step_header.h"
#include "transport/socket_engine.h"

namespace reccl::transport {

class SocketSendPath final : public channel::Path, public EnginePath {
 public:
  // Sends steps after `sentBefore` (default: everything not yet posted). A migrated path passes
  // the receiver's applied step to resend what the old path may have lost.
  SocketSendPath(SocketEngine* engine, UniqueFd fd, channel::SendPort* port, std::string desc,
                 uint64_t sentBefore = UINT64_MAX);
  ~SocketSendPath() override;

  void notifyPosted() noexcept override { engine_->kick(); }
  void notifyConsumed() noexcept override {}
  bool sendsParts() const noexcept override { return true; }
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override { quiesce(); }

  void pump(SocketEngine& engine) override;
  void complete(SocketEngine& engine, IoOp& op, int res) override;
  void quiesce() noexcept override;
  int inflight() const noexcept override { return sendOp_.inflight + ackOp_.inflight; }
  void start() { engine_->add(this); }
  // The socket, for the failover monitor's TCP_INFO stall check (read-only use).
  int fd() const noexcept { return fd_.get(); }

 private:
  void failed(const Status& s);

  SocketEngine* engine_;
  UniqueFd fd_;
  channel::SendPort* port_;
  std::string desc_;
  std::atomic<bool> dead_{false};
  uint64_t sent_;               // steps fully handed to the socket
  uint64_t batchEnd_ = 0;       // last step of the batch in flight (0: none)
  std::vector<iovec> iov_;
  size_t iovFirst_ = 0;
  msghdr msg_{};
  IoOp sendOp_;
  IoOp ackOp_;
  std::array<std::byte, channel::kAckFrameBytes * 32> ackBuf_{};
  size_t ackFill_ = 0;
};

class SocketRecvPath final : public channel::Path, public EnginePath {
 public:
  // A migrated path passes ackedBefore = 0 so that it acknowledges the applied step at once (acks
  // in flight on the old path may be lost, and the sender may be waiting for them).
  SocketRecvPath(SocketEngine* engine, UniqueFd fd, channel::RecvPort* port, std::string desc,
                 uint64_t ackedBefore = UINT64_MAX);
  ~SocketRecvPath() override;

  void notifyPosted() noexcept override {}
  void notifyConsumed() noexcept override { engine_->kick(); }
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override { quiesce(); }

  void pump(SocketEngine& engine) override;
  void complete(SocketEngine& engine, IoOp& op, int res) override;
  void quiesce() noexcept override;
  int inflight() const noexcept override { return recvOp_.inflight + ackOp_.inflight; }
  void start() { engine_->add(this); }
  int fd() const noexcept { return fd_.get(); }

 private:
  enum class Phase { kHeader, kPayload, kDrain };
  void failed(const Status& s);
  // Consumes staged bytes (headers, small payloads, read-ahead); false after a failure.
  bool consumeStage();
  bool onHeader();
  void publish();

  SocketEngine* engine_;
  UniqueFd fd_;
  channel::RecvPort* port_;
  std::string desc_;
  std::atomic<bool> dead_{false};
  Phase phase_ = Phase::kHeader;
  channel::StepHeader cur_{};
  std::array<std::byte, channel::kStepHeaderBytes> hdr_{};
  size_t got_ = 0;   // payload (or drained) bytes of the current step so far
  std::byte* payload_ = nullptr;  // where the current step's payload goes: its slot or direct target
  bool direct_ = false;
  size_t want_ = 0;
  // Reads go into this staging buffer (a header and a small payload in one recv) unless a large
  // payload remains, which is received straight into its slot.
  static constexpr size_t kStageBytes = 64 * 1024;
  std::vector<std::byte> stage_;
  size_t stageOff_ = 0;
  size_t stageLen_ = 0;
  bool recvIntoSlot_ = false;
  IoOp recvOp_;
  IoOp ackOp_;
  std::array<std::byte, channel::kAckFrameBytes> ackBuf_{};
  size_t ackSentBytes_ = 0;
  uint64_t ackInFlightValue_ = 0;
  uint64_t acked_;
};

// Watches a socket that carries no data (the side channel of a shared-memory connection): its
// end-of-file means the peer process is gone.
class LivenessPath final : public EnginePath {
 public:
  LivenessPath(SocketEngine* engine, UniqueFd fd, channel::PortBase* port, bool isSender);
  ~LivenessPath() override;
  void pump(SocketEngine& engine) override;
  void complete(SocketEngine& engine, IoOp& op, int res) override;
  void quiesce() noexcept override;
  int inflight() const noexcept override { return op_.inflight; }
  void start() { engine_->add(this); }

 private:
  SocketEngine* engine_;
  UniqueFd fd_;
  channel::PortBase* port_;
  bool isSender_;
  std::atomic<bool> dead_{false};
  IoOp op_;
  std::array<std::byte, 64> buf_{};
};

}  // namespace reccl::transport
