// One reliable-connected queue pair with its own completion queue and completion channel, on one
// rail. Every receive this transport posts is empty (steps and acks arrive as RDMA writes with
// an immediate, which only consume a receive request), so the QP keeps its receive queue full
// itself: `recv` empty receives are posted at creation and one is reposted per receive polled.
//
// Threads: post() from any thread (the algorithm's and the progress thread); poll(), arm(),
// drain() and drainReceives() from one thread at a time (the progress engine, or the one that
// took the path out of it).
#pragma once

#include <infiniband/verbs.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "transport/verbs/conn_info.h"
#include "transport/verbs/qp_settings.h"
#include "transport/verbs/rail_device.h"
#include "transport/verbs/verbs_handle.h"

namespace reccl::transport::verbs {

// wr_id of the QP's own receives; send work requests must leave this bit clear.
inline constexpr uint64_t kRecvWrId = 1ull << 63;

class RcQp {
 public:
  struct Depth {
    uint32_t send = 16;
    uint32_t recv = 16;
  };
  // A QP in INIT on `dev`'s port, its receive queue filled, with a random first PSN.
  static Result<std::unique_ptr<RcQp>> create(RailDevice& dev, Depth depth);
  RcQp(const RcQp&) = delete;
  RcQp& operator=(const RcQp&) = delete;
  ~RcQp();

  int rail() const noexcept { return rail_; }
  uint32_t qpn() const noexcept { return qp_->qp_num; }
  uint32_t psn() const noexcept { return psn_; }
  const Depth& depth() const noexcept { return depth_; }
  // Fills this QP's part of `info` (qpn, psn, gid, lid, mtu); the rest comes from the
  // registration (ConnRegistration::describe).
  void fillLocal(ConnInfo& info) const noexcept;

  // INIT -> RTR -> RTS towards the peer's QP. kProtocol when `remote` is on another rail.
  Status connect(const ConnInfo& remote, const QpSettings& settings);

  // Posts one send work request (signaled: every send completes, so the counts below are exact
  // and an error QP is drained by counting). ENOMEM when the send queue is full.
  Status post(ibv_send_wr& wr) noexcept;
  uint32_t sendsOutstanding() const noexcept { return sendsOut_.load(std::memory_order_acquire); }

  // Polls up to out.size() completions. A successful receive is reposted at once; an empty
  // receive queue after an error is not refilled.
  int poll(std::span<ibv_wc> out) noexcept;

  // The completion channel: non-blocking, POLLIN once an armed CQ has a completion.
  int completionFd() const noexcept { return channel_->fd; }
  // Asks for the next completion's event; the caller polls once more before it sleeps.
  Status arm() noexcept;
  // Consumes (and acknowledges) the channel's pending events.
  void consumeEvents() noexcept;

  // Moves the QP to ERR: no more retries, every posted request completes flushed. Idempotent.
  Status toError() noexcept;
  bool inError() const noexcept { return error_.load(std::memory_order_acquire); }
  // Marks the QP as in error after a completion error (the hardware moved it there).
  void sawError() noexcept { error_.store(true, std::memory_order_release); }
  // In ERR: polls until every posted send and receive has completed (flushed), handing each
  // completion to `each` (may be null). kTimeout at the deadline.
  template <typename F>
  Status drain(Deadline deadline, F each);
  // In ERR: polls until every posted receive has completed (flushed); send completions polled on
  // the way are counted as drain() counts them. A receive queue flushes once the QP's responder
  // has seen ERR (the pattern of the kernel's ib_drain_rq): a write the responder was executing
  // when the QP moved there has landed by then, and none lands after. Before that, a late packet
  // of an old write can still reach memory (rxe: a packet the responder took before the state
  // change). kTimeout at the deadline.
  Status drainReceives(Deadline deadline);
  Result<ibv_qp_state> state() const;

 private:
  RcQp() = default;
  Status postRecvs(uint32_t n) noexcept;
  // Polls (each completion to `each`) until done() or the deadline, asleep on the completion
  // channel while nothing comes. `what` names the wait in its errors.
  template <typename Done, typename F>
  Status pollUntil(Deadline deadline, Done done, F each, const char* what);
  // Waits for the armed CQ's event (or the deadline) and consumes it.
  Status awaitEvent(Deadline deadline) noexcept;

  int rail_ = -1;
  LocalPort local_;
  RailPort port_;
  uint32_t psn_ = 0;
  Depth depth_;
  std::atomic<uint32_t> sendsOut_{0};
  uint32_t recvsOut_ = 0;  // poller's thread
  std::atomic<bool> error_{false};
  uint32_t unackedEvents_ = 0;
  // Destroyed in reverse order: the QP, then its CQ, then the channel.
  CompletionChannel channel_;
  CompletionQueue cq_;
  QueuePair qp_;
};

template <typename F>
Status RcQp::drain(Deadline deadline, F each) {
  if (!inError()) RECCL_TRY(toError());
  return pollUntil(deadline, [&] { return sendsOutstanding() == 0 && recvsOut_ == 0; }, each, "draining");
}

template <typename Done, typename F>
Status RcQp::pollUntil(Deadline deadline, Done done, F each, const char* what) {
  ibv_wc wc[16];
  bool armed = false;
  while (!done()) {
    int n = poll(wc);
    if (n < 0) return Status(Errc::kSystem, std::string("rdma: polling the completion queue failed while ") + what);
    for (int i = 0; i < n; ++i) each(wc[i]);
    if (n > 0) continue;
    if (deadline.expired())
      return Status(Errc::kTimeout, "rdma: qp " + std::to_string(qpn()) + " still has " +
                                        std::to_string(sendsOutstanding()) + " sends and " + std::to_string(recvsOut_) +
                                        " receives outstanding after its deadline for " + what);
    // Asleep on the completion channel, not spinning: on a one-CPU host the flushes come from
    // the driver's work (rxe's tasks), which a spinning poller delays. Armed first, then polled
    // once more, since a completion that came before the arm raises no event.
    if (!armed) {
      RECCL_TRY(arm());
      armed = true;
      continue;
    }
    RECCL_TRY(awaitEvent(deadline));
    armed = false;
  }
  return Status::Ok();
}

}  // namespace reccl::transport::verbs
