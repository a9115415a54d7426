#include "transport/verbs/rc_qp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>

#include <cerrno>

namespace reccl::transport::verbs {

Result<std::unique_ptr<RcQp>> RcQp::create(RailDevice& dev, Depth depth) {
  std::unique_ptr<RcQp> q(new RcQp());
  q->rail_ = dev.rail();
  q->local_ = dev.localPort();
  q->port_ = dev.port();
  q->depth_ = depth;
  const std::string on = " on " + dev.port().device;
  ibv_comp_channel* ch = ibv_create_comp_channel(dev.context());
  if (!ch) return Status::FromErrno(errno, "rdma: completion channel" + on);
  q->channel_ = CompletionChannel(ch, "completion channel");
  int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return Status::FromErrno(errno, "rdma: completion channel non-blocking");
  ibv_cq* cq = ibv_create_cq(dev.context(), static_cast<int>(depth.send + depth.recv), nullptr, ch, 0);
  if (!cq) return Status::FromErrno(errno, "rdma: completion queue" + on);
  q->cq_ = CompletionQueue(cq, "completion queue");
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = depth.send;
  init.cap.max_recv_wr = depth.recv;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 16;  // an ack word (AckMode::kWrite) leaves inline
  init.sq_sig_all = 1;
  ibv_qp* qp = ibv_create_qp(dev.pd(), &init);
  if (!qp) return Status::FromErrno(errno, "rdma: RC queue pair" + on);
  q->qp_ = QueuePair(qp, "queue pair");
  uint32_t r = 0;
  if (getrandom(&r, sizeof(r), 0) != sizeof(r)) r = static_cast<uint32_t>(monotonicNs());
  q->psn_ = r & 0xffffff;
  QpTransition t = initTransition(q->local_);
  if (int rc = ibv_modify_qp(qp, &t.attr, t.mask); rc != 0) return Status::FromErrno(rc, "rdma: qp to INIT" + on);
  RECCL_TRY(q->postRecvs(depth.recv));
  return q;
}

RcQp::~RcQp() {
  // A CQ whose events were not acknowledged cannot be destroyed.
  if (cq_ && unackedEvents_) ibv_ack_cq_events(cq_.get(), unackedEvents_);
}

void RcQp::fillLocal(ConnInfo& info) const noexcept {
  info.qpn = qp_->qp_num;
  info.psn = psn_;
  info.gid = port_.gid;
  info.lid = port_.lid;
  info.mtu = static_cast<uint8_t>(port_.activeMtu);
}

Status RcQp::connect(const ConnInfo& remote, const QpSettings& settings) {
  if (remote.rail != rail_)
    return Status(Errc::kProtocol, "rdma: peer qp is on rail " + std::to_string(remote.rail) + ", this one on rail " +
                                       std::to_string(rail_));
  RECCL_TRY(validateQpSettings(settings));
  LocalPort local = local_;
  if (settings.gidIndex >= 0) local.gidIndex = static_cast<uint16_t>(settings.gidIndex);
  QpTransition rtr = rtrTransition(settings, local, remote);
  if (int rc = ibv_modify_qp(qp_.get(), &rtr.attr, rtr.mask); rc != 0)
    return Status::FromErrno(rc, "rdma: qp " + std::to_string(qpn()) + " to RTR (peer " + describeConnInfo(remote) + ")");
  QpTransition rts = rtsTransition(settings, psn_);
  if (int rc = ibv_modify_qp(qp_.get(), &rts.attr, rts.mask); rc != 0)
    return Status::FromErrno(rc, "rdma: qp " + std::to_string(qpn()) + " to RTS");
  return Status::Ok();
}

Status RcQp::postRecvs(uint32_t n) noexcept {
  for (uint32_t i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kRecvWrId;
    wr.num_sge = 0;
    if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0) return Status::FromErrno(rc, "rdma: posting a receive");
    ++recvsOut_;
  }
  return Status::Ok();
}

Status RcQp::post(ibv_send_wr& wr) noexcept {
  if (sendsOut_.load(std::memory_order_relaxed) >= depth_.send) return Status(Errc::kSystem, "rdma: send queue full");
  wr.next = nullptr;
  wr.send_flags |= IBV_SEND_SIGNALED;
  sendsOut_.fetch_add(1, std::memory_order_acq_rel);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
    sendsOut_.fetch_sub(1, std::memory_order_acq_rel);
    return Status::FromErrno(rc, "rdma: posting to qp " + std::to_string(qpn()));
  }
  return Status::Ok();
}

int RcQp::poll(std::span<ibv_wc> out) noexcept {
  int n = ibv_poll_cq(cq_.get(), static_cast<int>(out.size()), out.data());
  if (n <= 0) return n;
  uint32_t repost = 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = out[i];
    // wr_id and status are all an error completion carries reliably (not the opcode).
    if (wc.wr_id & kRecvWrId) {
      --recvsOut_;
      if (wc.status == IBV_WC_SUCCESS && !inError()) ++repost;
    } else {
      sendsOut_.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (wc.status != IBV_WC_SUCCESS) sawError();
  }
  if (repost && !inError()) (void)postRecvs(repost);
  return n;
}

Status RcQp::arm() noexcept {
  if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return Status::FromErrno(rc, "rdma: arming the completion queue");
  return Status::Ok();
}

void RcQp::consumeEvents() noexcept {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(channel_.get(), &cq, &ctx) == 0) ++unackedEvents_;
  // Acknowledging takes a lock: batch it.
  if (unackedEvents_ >= 64) {
    ibv_ack_cq_events(cq_.get(), unackedEvents_);
    unackedEvents_ = 0;
  }
}

Status RcQp::toError() noexcept {
  // Any state may move to ERR, ERR included: no need to know where it is.
  error_.store(true, std::memory_order_release);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE); rc != 0)
    return Status::FromErrno(rc, "rdma: qp " + std::to_string(qpn()) + " to ERR");
  return Status::Ok();
}

Status RcQp::drainReceives(Deadline deadline) {
  if (!inError()) RECCL_TRY(toError());
  // No marker receive posted in ERR as ib_drain_rq does: rxe (Debian's 6.1) never flushes one.
  // A receive path never runs out of posted receives (depthForSlots: twice the slots, at most the
  // slots in use), so the ones posted before the state change give the responder's flush.
  return pollUntil(deadline, [&] { return recvsOut_ == 0; }, [](const ibv_wc&) {}, "flushing its receives");
}

Status RcQp::awaitEvent(Deadline deadline) noexcept {
  pollfd p{completionFd(), POLLIN, 0};
  int rc = ::poll(&p, 1, deadline.remainingMsForPoll());
  if (rc < 0 && errno != EINTR)
    return Status::FromErrno(errno, "rdma: waiting on qp " + std::to_string(qpn()) + "'s completion channel");
  consumeEvents();
  return Status::Ok();
}

Result<ibv_qp_state> RcQp::state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_.get(), &attr, IBV_QP_STATE, &init); rc != 0)
    return Status::FromErrno(rc, "rdma: query qp " + std::to_string(qpn()));
  return attr.qp_state;
}

}  // namespace reccl::transport::verbs
