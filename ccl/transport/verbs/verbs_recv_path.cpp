#include "transport/verbs/verbs_paths.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>

#include "channel/recv_framing.h"
#include "channel/step_header.h"

namespace reccl::transport::verbs {

namespace {
constexpr uint64_t kAckWrId = 1ull << 62;  // with the applied step in the low bits
}

Result<std::unique_ptr<VerbsRecvPath>> VerbsRecvPath::create(channel::RecvPort* port, std::unique_ptr<RcQp> qp,
                                                             const ConnRegistration* reg, const ConnInfo& remote,
                                                             std::string desc, VerbsPathOptions opts,
                                                             uint64_t ackedBefore) {
  if (!port || !qp || !reg) return Status(Errc::kInvalidArgument, "verbs receive path: null port, qp or registration");
  if (remote.role != ConnRole::kSender) return Status(Errc::kProtocol, "verbs receive path: the peer record is not a sender's");
  if (remote.slots != port->slots() || remote.chunkBytes != port->chunkBytes())
    return Status(Errc::kProtocol, "verbs receive path: the sender's ring has " + std::to_string(remote.slots) +
                                       " slots of " + std::to_string(remote.chunkBytes) + " bytes, this end " +
                                       std::to_string(port->slots()) + " of " + std::to_string(port->chunkBytes()));
  RECCL_TRY(reg->slotRkey(qp->rail()).status());  // the ring is writable on this rail
  std::unique_ptr<VerbsRecvPath> p(new VerbsRecvPath(port, std::move(qp), reg, remote, std::move(desc), opts, false));
  p->ackPosted_ = std::min(ackedBefore, port->applied());
  return p;
}

void VerbsRecvPath::postAck() noexcept {
  // A refused post is reported after the lock: the failover hook may shut this path down.
  std::optional<ibv_wc> refused;
  {
    std::lock_guard lk(postMu_);
    if (dead()) return;
    const uint64_t applied = recvPort()->applied();
    if (applied <= ackPosted_) return;
    // A full send queue holds acks not yet completed; the next progress() posts the latest value
    // (acks are cumulative, so skipping one loses nothing).
    if (qp_->sendsOutstanding() >= qp_->depth().send) return;
    ibv_send_wr wr{};
    wr.wr_id = kAckWrId | applied;
    wr.wr.rdma.remote_addr = remote_.addr;
    wr.wr.rdma.rkey = remote_.rkey;
    ibv_sge sge{reinterpret_cast<uint64_t>(&applied), sizeof(applied), 0};
    if (opts_.ack == AckMode::kImm) {
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(static_cast<uint32_t>(applied));
      wr.num_sge = 0;
    } else {
      // Inline: the value is copied at post time, so it needs no registered buffer.
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_INLINE;
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    if (Status st = qp_->post(wr); !st.ok()) {
      if (shutdown_.load(std::memory_order_acquire)) return;
      RECCL_WARN(kLogNet, "%s: %s", desc_.c_str(), st.message().c_str());
      refused = ibv_wc{};
      refused->wr_id = wr.wr_id;
      refused->status = IBV_WC_LOC_QP_OP_ERR;
    } else {
      ackPosted_ = applied;
    }
  }
  if (refused) onError(*refused);
}

void VerbsRecvPath::onStep(uint32_t imm) noexcept {
  channel::RecvPort* port = recvPort();
  const uint64_t received = port->received();
  const uint64_t next = received + 1;
  const uint64_t step = next + static_cast<int32_t>(imm - static_cast<uint32_t>(next));
  auto failWith = [&](const Status& s) {
    RECCL_WARN(kLogNet, "%s", s.message().c_str());
    dead_.store(true, std::memory_order_release);
    port->fail(s);
  };
  auto protocolError = [&](const std::string& what) { failWith(Status(Errc::kProtocol, desc_ + ": " + what)); };
  if (step == 0 || step + port->slots() < next) {
    protocolError("write with immediate " + std::to_string(imm) + " is no step near " + std::to_string(next));
    return;
  }
  // A step resent after a migration that this end already has: its slot is not read, since the
  // sender may already have written the step S later there (it got the ack of this one once the
  // resend landed, and that can be before this completion is polled).
  if (step < next) {
    if (port->env()) port->env()->duplicateSteps.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // The header landed in the slot with the payload: the same framing as every path's
  // (channel/recv_framing.h), once it names the step the immediate said.
  const std::byte* frame = port->memory().slotFrame(step);
  std::span<const std::byte> header(frame, channel::kStepHeaderBytes);
  if (step != next) {
    // A step of an older epoch is a retired path's, whatever its order (completions its QP had
    // queued when the epoch changed): dropped as stale, as classifyStep checks the epoch first.
    if (auto h = channel::decodeStepHeader(header); h.ok() && h->step == step && h->epoch < port->epoch()) {
      if (port->env()) port->env()->staleSteps.fetch_add(1, std::memory_order_relaxed);
      dropped_ = {h->step, h->epoch, port->epoch()};
      return;
    }
    std::string why = "step " + std::to_string(step) + " arrived after step " + std::to_string(received);
    if (dropped_.step)
      why += " (this path dropped step " + std::to_string(dropped_.step) + " of epoch " +
             std::to_string(dropped_.epoch) + " as a duplicate or stale, the port's epoch " +
             std::to_string(dropped_.portEpoch) + ")";
    else
      why += " (this path dropped nothing; the port's epoch " + std::to_string(port->epoch()) + ")";
    protocolError(why);
    return;
  }
  if (auto h = channel::decodeStepHeader(header); h.ok() && h->step != step) {
    protocolError("the slot of step " + std::to_string(step) + " holds step " + std::to_string(h->step));
    return;
  }
  channel::StepArrival a = channel::judgeArrival(*port, header, desc_);
  if (a.kind == channel::StepArrival::Kind::kError) return failWith(a.error);
  if (a.kind == channel::StepArrival::Kind::kNext) {
    markHeard();
    port->onReceived(step);
  } else {
    dropped_ = {a.header.step, a.header.epoch, port->epoch()};
  }
}

int VerbsRecvPath::progress() noexcept {
  int n = pollCompletions([&](const ibv_wc& wc) {
    if (!(wc.wr_id & kRecvWrId)) return;
    bytes_.fetch_add(wc.byte_len, std::memory_order_relaxed);
    if (!dead()) onStep(ntohl(wc.imm_data));
  });
  postAck();  // one the send queue had no room for
  return n;
}

}  // namespace reccl::transport::verbs
