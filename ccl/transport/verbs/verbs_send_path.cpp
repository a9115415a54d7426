#include "transport/verbs/verbs_paths.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "channel/conn_memory.h"

namespace reccl::transport::verbs {

Result<std::unique_ptr<VerbsSendPath>> VerbsSendPath::create(channel::SendPort* port, std::unique_ptr<RcQp> qp,
                                                             const ConnRegistration* reg, const ConnInfo& remote,
                                                             std::string desc, VerbsPathOptions opts,
                                                             uint64_t sentBefore) {
  if (!port || !qp || !reg) return Status(Errc::kInvalidArgument, "verbs send path: null port, qp or registration");
  if (remote.role != ConnRole::kReceiver) return Status(Errc::kProtocol, "verbs send path: the peer record is not a receiver's");
  if (remote.slots != port->slots() || remote.chunkBytes != port->chunkBytes())
    return Status(Errc::kProtocol, "verbs send path: the receiver's ring has " + std::to_string(remote.slots) + " slots of " +
                                       std::to_string(remote.chunkBytes) + " bytes, this end " +
                                       std::to_string(port->slots()) + " of " + std::to_string(port->chunkBytes()));
  RECCL_ASSIGN_OR_RETURN(uint32_t lkey, reg->slotLkey(qp->rail()));
  std::unique_ptr<VerbsSendPath> p(new VerbsSendPath(port, std::move(qp), reg, remote, std::move(desc), opts, true));
  p->lkey_ = lkey;
  uint64_t start = std::max(std::min(sentBefore, port->posted()), port->acked());
  p->sent_.store(start, std::memory_order_relaxed);
  p->writeDone_.store(start, std::memory_order_relaxed);
  p->heldAck_ = port->acked();
  return p;
}

void VerbsSendPath::postSteps() noexcept {
  // A refused post is reported after the lock: the failover hook may shut this path down.
  std::optional<ibv_wc> refused;
  {
    std::lock_guard lk(postMu_);
    channel::SendPort* port = sendPort();
    const uint64_t posted = port->posted();
    const uint32_t slots = port->slots();
    const size_t stride = channel::slotStride(port->chunkBytes());
    for (uint64_t s = sent_.load(std::memory_order_relaxed) + 1; s <= posted; ++s) {
      if (dead()) break;
      if (qp_->sendsOutstanding() >= qp_->depth().send) break;  // progress() posts the rest
      std::span<const std::byte> frame = port->frame(s);
      // The receiver takes the epoch of the path in force; a resent step still carries the old one.
      channel::stampFrameEpoch(port->memory().slotFrame(s), port->epoch());
      ibv_sge sge{reinterpret_cast<uint64_t>(frame.data()), static_cast<uint32_t>(frame.size()), lkey_};
      ibv_send_wr wr{};
      wr.wr_id = s;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.imm_data = htonl(static_cast<uint32_t>(s));
      wr.wr.rdma.remote_addr = remote_.addr + ((s - 1) % slots) * stride;
      wr.wr.rdma.rkey = remote_.rkey;
      if (Status st = qp_->post(wr); !st.ok()) {
        if (!shutdown_.load(std::memory_order_acquire)) {
          RECCL_WARN(kLogNet, "%s: %s", desc_.c_str(), st.message().c_str());
          refused = ibv_wc{};
          refused->wr_id = s;
          refused->status = IBV_WC_LOC_QP_OP_ERR;  // a post refused with room in the queue: the QP is broken
        }
        break;
      }
      sent_.store(s, std::memory_order_release);
    }
  }
  if (refused) onError(*refused);
}

bool VerbsSendPath::needsPolling() const noexcept {
  return opts_.ack == AckMode::kWrite && !dead() && sendPort()->acked() < sent_.load(std::memory_order_acquire);
}

void VerbsSendPath::publishAck() noexcept {
  if (dead()) return;  // a retired path's late acks must not free slots the new path still reads
  uint64_t a = std::min(heldAck_, writeDone_.load(std::memory_order_acquire));
  if (a > sendPort()->acked()) sendPort()->onAck(a);
}

int VerbsSendPath::progress() noexcept {
  int n = pollCompletions([&](const ibv_wc& wc) {
    if (!(wc.wr_id & kRecvWrId)) {
      // The step's slot is still held: its ack is published only once writeDone_ covers it.
      const channel::SendPort::FrameParts f = sendPort()->frameParts(wc.wr_id);
      bytes_.fetch_add(f.header.size() + f.payload.size(), std::memory_order_relaxed);
      writeDone_.store(std::max(writeDone_.load(std::memory_order_relaxed), wc.wr_id), std::memory_order_release);
      return;
    }
    // An ack: the applied step's low 32 bits, within a window of the latest one.
    const uint32_t low = ntohl(wc.imm_data);
    const uint64_t applied = heldAck_ + static_cast<int32_t>(low - static_cast<uint32_t>(heldAck_));
    // Read now, not before the poll: the algorithm's thread posts (and the step can be written,
    // applied and acknowledged) while this thread polls. Posting comes before the write, so
    // every genuine ack is within what is posted by the time its completion is seen.
    const uint64_t posted = sendPort()->posted();
    if (applied > posted) {
      RECCL_WARN(kLogNet, "%s: ack of step %llu beyond the %llu posted", desc_.c_str(),
                 static_cast<unsigned long long>(applied), static_cast<unsigned long long>(posted));
      ibv_wc bad = wc;
      bad.status = IBV_WC_REM_OP_ERR;
      onError(bad);
      return;
    }
    // An ack completion on this QP: the peer sends on it (the shared ack word of AckMode::kWrite
    // may still hold what the peer's previous QP wrote, so it says nothing of this path).
    markHeard();
    heldAck_ = std::max(heldAck_, applied);
  });
  if (!qp_) return n;
  if (opts_.ack == AckMode::kWrite) {
    const uint64_t applied = reg_->ackWord()->load(std::memory_order_acquire);  // before `posted`, as above
    if (applied <= sendPort()->posted()) heldAck_ = std::max(heldAck_, applied);
  }
  publishAck();
  if (sent_.load(std::memory_order_acquire) < sendPort()->posted()) postSteps();
  return n;
}

}  // namespace reccl::transport::verbs
