// RDMA verbs paths under the two ends of a directed connection: the same channel layer (steps,
// slots, acks, exactly-once framing; channel/port.h) as the socket paths, carried by one RC QP.
//
// Data: the sender RDMA-writes each step's frame (64-byte header + payload) from its slot into
// the receiver's slot of the same index (slot = (step - 1) mod S), with the immediate = the
// step's low 32 bits. The write consumes one of the receiver's empty receive requests and
// completes there in step order; the receiver checks the header that landed against the
// immediate and the exactly-once rules (classifyStep), then publishes the step.
// Acks (AckMode): kImm (default) an empty RDMA write with immediate = applied step's low 32 bits,
// which completes at the sender and so can wake a sleeping progress thread; kWrite an 8-byte
// RDMA write of the applied step into the sender's ack word, which the sender must poll.
// A receiver acknowledges every applied step.
//
// Migration (what failover does with these): the slots of both ends are registered on every
// rail up front (ConnRegistration), so a new path on another rail needs a new QP and nothing
// else. Before the new path resends, the receiver's old path must be quiesced (stopLanding():
// its QP moved to ERR and its receive queue flushed). Moving to ERR is not enough by itself: the
// responder may be executing a packet of an old write as the state changes, and that packet
// lands when it lands. Once the receive queue has flushed the responder has seen ERR and lets
// nothing land, so neither a late packet nor a late retransmission of the old QP can overwrite
// a slot the new path already wrote (a resent step's header with the old epoch, or a newer
// step's bytes). The sender's old path shut down
// stops its retries and never publishes an ack again (the new path holds acks for steps it is
// still writing; see VerbsSendPath). Steps the receiver already has in its slots stay there
// across paths; resending them is harmless (same bytes, counted as duplicates).
//
// Liveness: an RC QP with nothing posted never learns that its peer or the peer's link is gone
// (a receiver waiting for the next step, a sender waiting for credit). A path failover watches
// (watch()) therefore posts a zero-length RDMA write, the probe, once it has heard nothing for a
// quarter of the stall time, and is stalled (stalled()) once it has heard nothing for the stall
// time with a probe outstanding, as the progress thread found when it last polled (a starved
// progress thread that has not looked yet proves nothing): the probe's ACK is a completion like
// any other. This bounds
// in-band detection by RECCL_STALL_TIMEOUT_MS whatever the QP's retry budget (34 s at NCCL's
// default 20:7 on hardware, never on rxe); an idle watched path costs one empty write per
// quarter stall time.
//
// Threads: notifyPosted/notifyConsumed from the algorithm's thread (they post directly),
// progress() from one progress thread, watch()/stalled() from the failover's monitor thread;
// retire() only once the path left its engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "channel/path.h"
#include "channel/port.h"
#include "reccl/common/deadline.h"
#include "reccl/common/graveyard.h"
#include "reccl/common/status.h"
#include "transport/verbs/conn_info.h"
#include "transport/verbs/conn_registration.h"
#include "transport/verbs/rc_qp.h"

namespace reccl::transport::verbs {

class VerbsProgress;

enum class AckMode : uint8_t { kImm, kWrite };
const char* ackModeName(AckMode m) noexcept;

struct VerbsPathOptions {
  AckMode ack = AckMode::kImm;
};

// The queue depths a connection's QPs need for `slots` steps in flight: at most `slots` data
// writes and `slots` acks are outstanding on a connection, doubled for the acks that overtake
// their completions.
RcQp::Depth depthForSlots(uint32_t slots) noexcept;

// Lock rule: postMu_ is held by whoever posts to the QP (the algorithm's thread in notify*, the
// progress thread), and by stopLanding() and retire() while they poll a path out of its engine
// (a late post on that dead path waits for them, then does nothing); failMu_ guards the first
// failure alone.
// A failure is reported to the port after postMu_ is released (the failover hook may shut the
// path down, which takes postMu_).
class VerbsPath : public channel::Path {
 public:
  ~VerbsPath() override;
  // Polls the QP's completions and acts on them: steps published, acks handed to the port, the
  // next steps or acks posted, a completion error reported to the port once
  // (PortBase::pathFailed, Errc::kLinkFailure). Returns the completions handled.
  virtual int progress() noexcept = 0;
  // True while the engine must poll without waiting for a completion event (a kWrite sender
  // with steps outstanding: its acks arrive as plain memory writes).
  virtual bool needsPolling() const noexcept { return false; }

  // Moves the QP to ERR: its retries stop at once and nothing lands through it any more.
  void shutdown() noexcept override;
  // channel::Path's life on an engine (a path made by VerbsPathFactory): start() adds it to the
  // engine and posts at once (a sender its steps, a receiver its applied step's ack), or reports
  // the failure set by failOnStart(); drain() takes it out of the engine (never from the engine's
  // thread) and hands it to `onDrained` (the factory's reaper, which retires it off the fault's
  // path). Without attach() both are the caller's business (VerbsProgress::add / remove).
  // `onStartFailure` reports a failed start later, from another thread: start() runs inside a
  // failover commit, which takes a failure reported there for its own retirement of the old path.
  // `graveyard` destroys the QP (retire() or the path's end): an rxe QP's destroy waits for its
  // packets still queued on the NIC, which a stalled transmit queue holds (graveyard.h).
  void attach(VerbsProgress* engine, std::shared_ptr<Graveyard> graveyard,
              std::function<void(VerbsPath*)> onDrained = {},
              std::function<void(VerbsPath*, Status)> onStartFailure = {}) noexcept {
    engine_ = engine;
    graveyard_ = std::move(graveyard);
    onDrained_ = std::move(onDrained);
    onStartFailure_ = std::move(onStartFailure);
  }
  channel::PortBase* port() const noexcept { return port_; }
  bool isSender() const noexcept { return isSender_; }
  void failOnStart(Status why) { startFailure_ = std::move(why); }
  void start() override;
  // Shuts the path down, takes it out of its engine (attach()'s; without one the caller has
  // removed it), and waits for its receive queue to flush (RcQp::drainReceives): a receiver's
  // old path, before the sender may write over the successor. Completions polled here are
  // dropped: the path is dead, and the steps they carry are resent.
  Status stopLanding(Deadline deadline) override;
  void drain() noexcept override;
  std::string describe() const override { return desc_; }

  // Liveness (file comment): probes from now on, one per quarter of `stallMs` of silence.
  void watch(int64_t stallMs) noexcept;
  // Nothing heard for `stallMs` and a probe outstanding for `stallMs` when the progress thread
  // last polled; posts the probe when one is due (nothing heard for a quarter of `stallMs`), and
  // once more when it went unanswered for another quarter. `quietMs`: since the last completion.
  bool stalled(uint64_t nowNs, int64_t stallMs, uint32_t* quietMs) noexcept;

  // Bytes this path moved (the rail meter's PathSample::bytes): a sender's writes completed,
  // header and payload; a receiver's steps landed, resent duplicates included. Written by the
  // progress thread only.
  uint64_t bytesMoved() const noexcept { return bytes_.load(std::memory_order_relaxed); }

  // The QP, until retire().
  RcQp& qp() noexcept { return *qp_; }
  int rail() const noexcept { return rail_; }

  struct Failure {
    uint64_t ns = 0;  // CLOCK_MONOTONIC when the error completion was polled
    ibv_wc_status status = IBV_WC_SUCCESS;
    uint32_t vendorErr = 0;
  };
  // The first completion error (not a flush after shutdown()), if any.
  std::optional<Failure> failure() const;
  // Out of its engine (VerbsProgress::remove), before or after a failure: shuts the path down,
  // polls until every posted request has completed (flushed), then destroys the QP and its CQ.
  // What stays is a husk the port may keep among its retired paths (a late notify does nothing),
  // without kernel resources (the QP's destroy is attach()'s graveyard's). kTimeout when the
  // flushes do not come by the deadline (the QP is then kept, in ERR).
  Status retire(Deadline deadline);

 protected:
  VerbsPath(channel::PortBase* port, std::unique_ptr<RcQp> qp, const ConnRegistration* reg, const ConnInfo& remote,
            std::string desc, VerbsPathOptions opts, bool isSender);
  // Records and reports a failed completion (flushes after shutdown() are expected, not errors).
  void onError(const ibv_wc& wc) noexcept;
  // Polls the QP (nothing once retired): each failed completion goes to onError, each successful
  // one to `done`. Returns the completions polled.
  template <typename F>
  int pollCompletions(F done) noexcept {
    if (!qp_) return 0;
    ibv_wc wc[16];
    int n = qp_->poll(wc);
    if (n < 0) {
      ibv_wc bad{};
      bad.status = IBV_WC_GENERAL_ERR;
      onError(bad);
      return 0;
    }
    bool heard = false;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        onError(wc[i]);
        continue;
      }
      heard = true;
      if (wc[i].wr_id == kProbeWrId)
        probing_.store(false, std::memory_order_release);
      else
        done(wc[i]);
    }
    // The clock only when the liveness check needs it: something heard, or a probe out (whose
    // verdict needs this poll's time, stored after probing_ was cleared: stalled() reads it first).
    if (heard || probing_.load(std::memory_order_acquire)) {
      const uint64_t now = monotonicNs();
      if (heard) heardNs_.store(now, std::memory_order_release);
      polledNs_.store(now, std::memory_order_release);
    }
    return n;
  }
  bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
  // Posts a liveness probe (a zero-length RDMA write); postMu_ held. false: not posted (no QP,
  // dead, the send queue full; a refused post is warned).
  bool postProbe() noexcept;
  // Out of attach()'s engine, once (its pass is over when this returns); never from its thread.
  void leaveEngine() noexcept;

  channel::PortBase* port_;
  // Posting (the algorithm's thread and the progress thread) holds it; retire() takes it to
  // take the QP away.
  std::mutex postMu_;
  std::unique_ptr<RcQp> qp_;
  int rail_;
  uint32_t qpn_;
  const ConnRegistration* reg_;
  ConnInfo remote_;
  std::string desc_;
  VerbsPathOptions opts_;
  bool isSender_;
  std::atomic<bool> dead_{false};
  std::atomic<bool> shutdown_{false};
  VerbsProgress* engine_ = nullptr;
  std::shared_ptr<Graveyard> graveyard_;  // attach()'s; none: the QP is destroyed in place
  std::function<void(VerbsPath*)> onDrained_;
  std::function<void(VerbsPath*, Status)> onStartFailure_;
  Status startFailure_;
  std::atomic<bool> inEngine_{false};
  // Liveness: the last successful completion (or the start), a probe posted and not completed.
  static constexpr uint64_t kProbeWrId = 1ull << 61;  // apart from steps, acks and receives
  std::atomic<int64_t> watchMs_{0};
  std::atomic<uint64_t> heardNs_{0};
  std::atomic<uint64_t> probeSentNs_{0};
  bool probeReposted_ = false;  // the outstanding probe was posted once more (stalled()'s thread)
  std::atomic<uint64_t> polledNs_{0};  // the progress thread's last look at the completions
  std::atomic<bool> probing_{false};
  std::atomic<uint64_t> bytes_{0};
  mutable std::mutex failMu_;
  std::optional<Failure> failure_;
};

class VerbsSendPath final : public VerbsPath {
 public:
  // `qp` is connected (RTS) to the receiver's QP of this connection; `remote` is the receiver's
  // record (its slot ring on this rail); `reg` this end's registration, outliving the path.
  // Sends steps after `sentBefore` or after the acknowledged step, whichever is later: a
  // migrated path passes the receiver's applied step to resend what the old path may have lost.
  static Result<std::unique_ptr<VerbsSendPath>> create(channel::SendPort* port, std::unique_ptr<RcQp> qp,
                                                       const ConnRegistration* reg, const ConnInfo& remote,
                                                       std::string desc, VerbsPathOptions opts = {},
                                                       uint64_t sentBefore = UINT64_MAX);
  // Posts the new steps from the calling thread (no hand-off to the progress thread).
  void notifyPosted() noexcept override { postSteps(); }
  void notifyConsumed() noexcept override {}
  int progress() noexcept override;
  bool needsPolling() const noexcept override;
  uint64_t sent() const noexcept { return sent_.load(std::memory_order_acquire); }

 private:
  using VerbsPath::VerbsPath;
  void postSteps() noexcept;
  // Hands the receiver's ack to the port, never beyond the last step whose write completed
  // here: a migrated path may still be reading a slot the receiver already has from the old
  // path, and the ack would let the algorithm reuse it.
  void publishAck() noexcept;
  channel::SendPort* sendPort() const noexcept { return static_cast<channel::SendPort*>(port_); }

  std::atomic<uint64_t> sent_{0};       // steps handed to the QP
  std::atomic<uint64_t> writeDone_{0};  // steps whose write completed (progress thread)
  uint64_t heldAck_ = 0;                // the receiver's latest ack (progress thread)
  uint32_t lkey_ = 0;
};

class VerbsRecvPath final : public VerbsPath {
 public:
  // `remote` is the sender's record (its ack word on this rail). A migrated path passes
  // ackedBefore = 0 so that it acknowledges the applied step at once (acks in flight on the old
  // path may be lost, and the sender may be waiting for them).
  static Result<std::unique_ptr<VerbsRecvPath>> create(channel::RecvPort* port, std::unique_ptr<RcQp> qp,
                                                       const ConnRegistration* reg, const ConnInfo& remote,
                                                       std::string desc, VerbsPathOptions opts = {},
                                                       uint64_t ackedBefore = UINT64_MAX);
  void notifyPosted() noexcept override {}
  // Acknowledges the applied steps from the releasing thread.
  void notifyConsumed() noexcept override { postAck(); }
  int progress() noexcept override;

 private:
  using VerbsPath::VerbsPath;
  void postAck() noexcept;
  // A step's write with immediate completed: check the frame in its slot and publish it.
  void onStep(uint32_t imm) noexcept;
  channel::RecvPort* recvPort() const noexcept { return static_cast<channel::RecvPort*>(port_); }

  uint64_t ackPosted_ = 0;  // the latest applied step an ack was posted for (postMu_)
  // The last step this path dropped, as its slot's header had it (progress thread): a gap
  // after it names it, since a drop should never leave one.
  struct Dropped {
    uint64_t step = 0;  // 0: none
    uint32_t epoch = 0;
    uint32_t portEpoch = 0;
  } dropped_;
};

}  // namespace reccl::transport::verbs
