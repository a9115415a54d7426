// TCP paths under the two ends of a directed connection, driven by the SocketEngine.
// Data flows sender -> receiver as [step header | payload]; acks flow back on the same socket.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "channel/path.h"
#include "channel/port.h"
#include "channel/recv_framing.h"
#include "channel/step_header.h"
#include "transport/socket_engine.h"

namespace reccl::transport {

// A path's urgentAbove_ when its socket is at normal priority.
inline constexpr uint64_t kNotUrgent = UINT64_MAX;

class SocketSendPath final : public channel::Path, public EnginePath {
 public:
  // Sends steps after `sentBefore` (default: everything not yet posted) or after the acknowledged
  // step, whichever is later. A migrated path passes the receiver's step to resend what the old
  // path may have lost.
  SocketSendPath(SocketEngine* engine, UniqueFd fd, channel::SendPort* port, std::string desc,
                 uint64_t sentBefore = UINT64_MAX);
  ~SocketSendPath() override;
  // The socket is at a raised priority (SocketLink): back to 0 once the receiver acknowledges
  // a step posted after this path was made, so the whole resend crosses at that priority (the
  // first new step too when there is nothing to resend). Before start().
  void normalPriorityAfterFirstNewStep() noexcept {
    urgentAbove_.store(port_->posted(), std::memory_order_relaxed);
  }

  // The poster's thread sends a small step itself when nothing is queued ahead of it (no
  // hand-off to the progress thread, whose wake-up costs more than the send); else, or when the
  // socket takes only part of it, the progress thread sends (the rest).
  void notifyPosted() noexcept override {
    if (!sendInline()) engine_->kick();
  }
  void notifyConsumed() noexcept override {}
  bool sendsParts() const noexcept override { return true; }
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override { quiesce(); }

  void pump(SocketEngine& engine) override;
  void complete(SocketEngine& engine, IoOp& op, int res) override;
  void quiesce() noexcept override;
  int inflight() const noexcept override { return sendOp_.inflight + ackOp_.inflight; }
  void start() override { engine_->add(this); }
  void abandon() noexcept override;
  void drain() noexcept override { engine_->remove(this); }
  bool handOver(channel::Path& next) noexcept override;
  // The socket (the path factory's TCP_INFO, keepalive and rail; read-only use).
  int fd() const noexcept override { return fd_.get(); }
  SocketEngine* engine() const noexcept { return engine_; }

 private:
  void failed(const Status& s);
  // True when the step just posted went out whole from the calling thread.
  bool sendInline() noexcept;
  // Appends step s's header and payload to iov_: the header from this path's copy of it,
  // stamped with `epoch`.
  void appendFrame(uint64_t s, uint32_t epoch);
  // Consumes n sent bytes from iov_ (advancing fullySent_ past each step whose last byte went);
  // true when all of it is sent.
  bool advanceIov(size_t n);
  // Progress thread: hands a held ack to the port, never beyond fullySent_ (cheap when none is
  // held).
  void publishAcks() noexcept;

  SocketEngine* engine_;
  UniqueFd fd_;
  channel::SendPort* port_;
  std::string desc_;
  std::atomic<bool> dead_{false};
  size_t inlineMaxBytes_;       // RECCL_INLINE_SEND_MAX_BYTES
  // The send side's state below is shared by the progress thread and an inline sender.
  std::mutex txMu_;
  uint64_t sent_;               // steps fully handed to the socket
  uint64_t batchEnd_ = 0;       // last step of the batch the progress thread sends (0: none)
  // Per slot, the header this path sends for the slot's step: the port's header with this
  // path's epoch. A path never writes the port's slots, so an old path still sending while its
  // successor starts (an inline send racing the move) cannot change the epoch the other sends.
  // A copy stays until its step is acknowledged, which is after its bytes left (heldAck_).
  std::vector<std::array<std::byte, channel::kStepHeaderBytes>> headers_;
  std::vector<iovec> iov_;
  std::vector<uint64_t> iovStep_;  // per iov_ entry: the step it ends, else 0
  size_t iovFirst_ = 0;
  // The head of iov_ that one submission carries (at most the engine's I/O chunk).
  std::vector<iovec> submitIov_;
  msghdr msg_{};
  IoOp sendOp_;
  IoOp ackOp_;
  std::array<std::byte, channel::kAckFrameBytes * 32> ackBuf_{};
  size_t ackFill_ = 0;
  // The receiver can acknowledge a step this path is still sending: a migrated path resends from
  // the step the handshake reported, and the receiver may have had more (steps the old path was
  // completing, a fail-back's old path still flowing). An ack publishes the step's slot for reuse
  // and tells the algorithm its direct payload is no longer needed, so while this path still
  // reads either (a sendmsg in flight, or queued in iov_) the ack is held: the port sees
  // min(heldAck_, fullySent_). Without a migration the receiver cannot be ahead of this path and
  // nothing is held.
  std::atomic<uint64_t> fullySent_;   // every byte of steps up to here handed to the socket
  std::atomic<uint64_t> heldAck_{0};  // the receiver's latest ack (progress thread writes)
  // normalPriorityAfterFirstNewStep: an ack above this lowers the priority; kNotUrgent: none raised.
  std::atomic<uint64_t> urgentAbove_{kNotUrgent};
};

class SocketRecvPath final : public channel::Path, public EnginePath {
 public:
  // A migrated path passes ackedBefore = 0 so that it acknowledges the applied step at once (acks
  // in flight on the old path may be lost, and the sender may be waiting for them), and each
  // step the old path received as soon as it is applied.
  SocketRecvPath(SocketEngine* engine, UniqueFd fd, channel::RecvPort* port, std::string desc,
                 uint64_t ackedBefore = UINT64_MAX);
  ~SocketRecvPath() override;
  // The socket is at a raised priority (SocketLink): back to 0 once an ack above every step
  // received so far has left whole, so the acks the sender waits for pass bulk traffic too; the
  // acks of steps the old path landed, applied after the move, do not count. Before start().
  void normalPriorityAfterFirstNewStep() noexcept {
    urgentAbove_.store(port_->received(), std::memory_order_relaxed);
  }

  void notifyPosted() noexcept override {}
  // An ack that is due now (see ackDue) leaves from the releasing thread itself when the socket
  // takes it whole and no ack is on its way (no eventfd write, no progress-thread wake-up);
  // else the progress thread is woken to send it. A deferred one goes with the thread's next
  // wake-up or after its short idle time.
  void notifyConsumed() noexcept override;
  std::string describe() const override { return desc_; }
  void shutdown() noexcept override { quiesce(); }

  void pump(SocketEngine& engine) override;
  void complete(SocketEngine& engine, IoOp& op, int res) override;
  void quiesce() noexcept override;
  int inflight() const noexcept override { return recvOp_.inflight + ackOp_.inflight; }
  bool hasDeferredWork() const noexcept override;
  void idle() noexcept override { flushAcks_ = true; }
  bool flush() noexcept override;
  void start() override { engine_->add(this); }
  void abandon() noexcept override;
  void drain() noexcept override { engine_->remove(this); }
  bool handOver(channel::Path& next) noexcept override;
  int fd() const noexcept override { return fd_.get(); }
  SocketEngine* engine() const noexcept { return engine_; }

 private:
  using Phase = channel::StepInHand::Phase;
  void failed(const Status& s);
  // Acks of small steps are batched: one per ackEvery_ applied steps, or at once for a step that
  // is large (> lazyAckMaxBytes_) or asks for it (kStepFlagAckNow), or when the engine idles.
  // A sender never waits on a batched ack: it has `slots` steps of room and ackEvery_ <= slots/2.
  bool ackDue(uint64_t applied, uint64_t acked) const noexcept;
  // Consumes staged bytes (headers, small payloads, read-ahead); false after a failure.
  bool consumeStage();
  bool onHeader();
  void publish();
  // True when the ack of `applied` went out whole from the calling thread.
  bool sendAckInline(uint64_t applied) noexcept;

  SocketEngine* engine_;
  UniqueFd fd_;
  channel::RecvPort* port_;
  std::string desc_;
  std::atomic<bool> dead_{false};
  channel::StepInHand in_;  // the step being read (channel/recv_framing.h)
  std::array<std::byte, channel::kStepHeaderBytes> hdr_{};
  std::byte* payload_ = nullptr;  // where the current step's payload goes: its slot or direct target
  bool direct_ = false;
  // Reads go into this staging buffer (a header and a small payload in one recv) unless a large
  // payload remains, which is received straight into its slot.
  static constexpr size_t kStageBytes = 64 * 1024;
  std::vector<std::byte> stage_;
  size_t stageOff_ = 0;
  size_t stageLen_ = 0;
  bool recvIntoSlot_ = false;
  // The last published step was large: the next one likely is too, so its header is read alone
  // and its payload can go straight into the slot instead of through stage_.
  bool lastStepLarge_ = false;
  IoOp recvOp_;
  // The ack state below is shared by the progress thread and an inline acker (ackMu_).
  std::mutex ackMu_;
  IoOp ackOp_;
  std::array<std::byte, channel::kAckFrameBytes> ackBuf_{};
  size_t ackSentBytes_ = 0;
  uint64_t ackInFlightValue_ = 0;
  // A frame in ackBuf_ is not yet wholly in the socket (the engine clears ackOp_.inflight before
  // complete() has counted the bytes, so that flag cannot tell an inline acker).
  bool ackPending_ = false;
  std::atomic<uint64_t> acked_;  // the latest ack the socket took whole
  std::atomic<uint64_t> urgentAbove_{kNotUrgent};  // as SocketSendPath's, for acks sent
  bool inlineAckFrames_;  // RECCL_INLINE_SEND_MAX_BYTES > 0: due acks may leave inline
  size_t lazyAckMaxBytes_;  // RECCL_LAZY_ACK_MAX_BYTES; 0: every step acked at once
  uint64_t ackEvery_;
  bool flushAcks_ = false;  // progress thread: ack whatever is applied on the next pump
  // The latest ack value handed to the socket, for notifyConsumed on the algorithm's thread,
  // and the latest one the socket took whole (flush()).
  std::atomic<uint64_t> ackQueued_{0};
  std::atomic<uint64_t> ackDone_{0};
  std::atomic<bool> flushRequested_{false};
  // Per slot: the step it holds needs its ack at once (written before the step is published).
  std::unique_ptr<std::atomic<bool>[]> ackNow_;
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
  int fd() const noexcept override { return fd_.get(); }
  std::string describe() const override;
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
