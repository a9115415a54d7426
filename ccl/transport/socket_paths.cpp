#include "transport/socket_paths.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "channel/recv_framing.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "transport/socket_util.h"

namespace reccl::transport {
namespace {

enum OpKind { kSend = 1, kAckRecv = 2, kRecv = 3, kAckSend = 4, kWatch = 5 };

Status ioError(int res, const std::string& desc, const char* what) {
  if (res == 0) return Status(Errc::kPeerFailure, desc + ": connection closed by peer while " + what);
  int err = -res;
  Errc code = (err == ECONNRESET || err == EPIPE) ? Errc::kPeerFailure : Errc::kLinkFailure;
  return Status(code, desc + ": " + what + " failed: " + strerror(err));
}

// A path at a raised priority (normalPriorityAfterFirstNewStep) goes back to 0 once an ack passes
// `urgentAbove`; the exchange makes it once, whichever thread sees the ack first.
void settlePriority(int fd, std::atomic<uint64_t>& urgentAbove, uint64_t ack) noexcept {
  const uint64_t above = urgentAbove.load(std::memory_order_relaxed);
  if (above == kNotUrgent || ack <= above) return;
  if (urgentAbove.exchange(kNotUrgent, std::memory_order_relaxed) != kNotUrgent) (void)setSocketPriority(fd, 0);
}

// The engine of a socket path (null: another kind of path).
SocketEngine* engineOf(channel::Path& p) noexcept;

// `old`'s engine starts `next` once `old` drained (SocketEngine::replace), when both are paths of
// the same engine.
bool handOverOnEngine(SocketEngine* engine, EnginePath* old, channel::Path& next) noexcept {
  auto* ep = dynamic_cast<EnginePath*>(&next);
  if (!ep || engineOf(next) != engine) return false;
  engine->replace(old, ep);
  return true;
}

}  // namespace

// ---------------------------------------------------------------- sender

SocketSendPath::SocketSendPath(SocketEngine* engine, UniqueFd fd, channel::SendPort* port, std::string desc,
                               uint64_t sentBefore)
    : engine_(engine),
      fd_(std::move(fd)),
      port_(port),
      desc_(std::move(desc)),
      inlineMaxBytes_(static_cast<size_t>(std::max<int64_t>(0, params::InlineSendMaxBytes()))),
      // Never below the acknowledged step: those slots may hold later steps by now.
      sent_(std::max(std::min(sentBefore, port->posted()), port->acked())),
      fullySent_(sent_) {
  sendOp_.owner = this;
  sendOp_.kind = kSend;
  ackOp_.owner = this;
  ackOp_.kind = kAckRecv;
  headers_.resize(port->slots());
  iov_.reserve(2 * port->slots());
  iovStep_.reserve(2 * port->slots());
  submitIov_.reserve(2 * port->slots());
}

SocketSendPath::~SocketSendPath() { engine_->remove(this); }

void SocketSendPath::quiesce() noexcept {
  dead_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

void SocketSendPath::abandon() noexcept { abortTcp(fd_.get()); }

bool SocketSendPath::handOver(channel::Path& next) noexcept { return handOverOnEngine(engine_, this, next); }

void SocketSendPath::failed(const Status& s) {
  if (dead_.exchange(true) || port_->replacedPath(this, s, kLogNet)) return;
  // A peer that finished and closed leaves an idle connection behind: not worth a warning.
  if (port_->acked() == port_->posted())
    RECCL_INFO(kLogNet, "%s", s.message().c_str());
  else
    RECCL_WARN(kLogNet, "%s", s.message().c_str());
  port_->pathFailed(this, true, s);
}

void SocketSendPath::appendFrame(uint64_t s, uint32_t epoch) {
  auto f = port_->frameParts(s);
  // Steps resent after a migration still carry the old path's epoch in their slot header (and a
  // post racing the epoch change may too): this path's copy carries its own.
  auto& h = headers_[(s - 1) % headers_.size()];
  std::memcpy(h.data(), f.header.data(), h.size());
  channel::stampFrameEpoch(h.data(), epoch);
  iov_.push_back({h.data(), h.size()});
  if (!f.payload.empty()) {
    iovStep_.push_back(0);  // the header: the step is not sent yet
    iov_.push_back({const_cast<std::byte*>(f.payload.data()), f.payload.size()});
  }
  iovStep_.push_back(s);  // the step's last piece
}

bool SocketSendPath::advanceIov(size_t n) {
  while (n > 0 && iovFirst_ < iov_.size()) {
    iovec& v = iov_[iovFirst_];
    if (n >= v.iov_len) {
      n -= v.iov_len;
      // seq_cst, as heldAck_'s store and both loads: a sender that finishes a step and an ack
      // that arrives meanwhile see each other's store on at least one side.
      if (iovStep_[iovFirst_] != 0) fullySent_.store(iovStep_[iovFirst_]);
      ++iovFirst_;
    } else {
      v.iov_base = static_cast<char*>(v.iov_base) + n;
      v.iov_len -= n;
      n = 0;
    }
  }
  return iovFirst_ == iov_.size();
}

bool SocketSendPath::sendInline() noexcept {
  if (inlineMaxBytes_ == 0) return false;
  // The progress thread is on this path right now: it takes the step on its next round.
  std::unique_lock lk(txMu_, std::try_to_lock);
  if (!lk.owns_lock() || dead_.load(std::memory_order_relaxed) || batchEnd_ != 0) return false;
  uint64_t posted = port_->posted();
  if (posted != sent_ + 1) return false;  // steps queued ahead: one batch from the progress thread
  if (port_->frameParts(posted).payload.size() > inlineMaxBytes_) return false;
  iov_.clear();
  iovStep_.clear();
  iovFirst_ = 0;
  appendFrame(posted, port_->epoch());
  msghdr m{};
  m.msg_iov = iov_.data();
  m.msg_iovlen = iov_.size();
  ssize_t n = ::sendmsg(fd_.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  // No room (EAGAIN) or an error: the progress thread sends the step and reports any failure.
  if (n < 0) return false;
  engine_->bytesSent.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  if (advanceIov(static_cast<size_t>(n))) {
    sent_ = posted;
    engine_->inlineSends.fetch_add(1, std::memory_order_relaxed);
    // An ack held for this step: the progress thread hands it to the port.
    if (heldAck_.load() > port_->acked()) engine_->kick();
    return true;
  }
  batchEnd_ = posted;  // the socket took part of it: the progress thread sends the rest
  return false;
}

void SocketSendPath::publishAcks() noexcept {
  uint64_t held = heldAck_.load();
  if (held <= port_->acked()) return;  // the common case: nothing held
  uint64_t a = std::min(held, fullySent_.load());
  if (a > port_->acked()) {
    settlePriority(fd_.get(), urgentAbove_, a);  // first: whoever sees the ack sees the priority
    port_->onAck(a);
  }
}

void SocketSendPath::pump(SocketEngine& engine) {
  if (dead_) return;
  publishAcks();
  // The poster holds the lock only while it sends a step inline; it kicks us when it leaves
  // work behind, so skipping the path meanwhile loses nothing.
  std::unique_lock lk(txMu_, std::try_to_lock);
  if (!sendOp_.inflight && lk.owns_lock()) {
    if (batchEnd_ == 0) {
      uint64_t posted = port_->posted();
      if (posted > sent_) {
        iov_.clear();
        iovStep_.clear();
        iovFirst_ = 0;
        uint32_t epoch = port_->epoch();
        for (uint64_t s = sent_ + 1; s <= posted; ++s) appendFrame(s, epoch);
        batchEnd_ = posted;
      }
    }
    if (batchEnd_ != 0) {
      // At most one I/O chunk per submission: io_uring copies it into the socket on this thread,
      // inside the submit call, and a whole batch (slots x chunk, or a large direct step) would
      // keep the thread from every other path's acks and from a migration meanwhile.
      size_t cap = engine.ioChunkBytes();
      size_t bytes = 0;
      submitIov_.clear();
      for (size_t i = iovFirst_; i < iov_.size(); ++i) {
        iovec v = iov_[i];
        if (cap && bytes + v.iov_len > cap) v.iov_len = cap - bytes;
        submitIov_.push_back(v);
        bytes += v.iov_len;
        if (cap && bytes >= cap) break;
      }
      msg_ = {};
      msg_.msg_iov = submitIov_.data();
      msg_.msg_iovlen = submitIov_.size();
      if (io_uring_sqe* s = engine.sqe(sendOp_)) {
        io_uring_prep_sendmsg(s, fd_.get(), &msg_, MSG_NOSIGNAL);
        engine.noteSubmit(bytes);
      }
    }
  }
  if (!ackOp_.inflight) {
    if (io_uring_sqe* s = engine.sqe(ackOp_))
      io_uring_prep_recv(s, fd_.get(), ackBuf_.data() + ackFill_, ackBuf_.size() - ackFill_, 0);
  }
}

void SocketSendPath::complete(SocketEngine& engine, IoOp& op, int res) {
  if (dead_) return;
  if (op.kind == kSend) {
    if (res <= 0) {
      if (res == -EAGAIN || res == -EINTR) return;
      return failed(ioError(res == 0 ? -EPIPE : res, desc_, "sending"));
    }
    engine.bytesSent.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
    {
      std::lock_guard lk(txMu_);
      if (advanceIov(static_cast<size_t>(res))) {
        sent_ = batchEnd_;
        batchEnd_ = 0;
      }
    }
    publishAcks();
    return;
  }
  // ack receive
  if (res <= 0) {
    if (res == -EAGAIN || res == -EINTR) return;
    return failed(ioError(res, desc_, "receiving acks"));
  }
  ackFill_ += static_cast<size_t>(res);
  size_t off = 0;
  uint64_t best = 0;
  while (ackFill_ - off >= channel::kAckFrameBytes) {
    auto a = channel::decodeAck(std::span<const std::byte>(ackBuf_.data() + off, channel::kAckFrameBytes));
    if (!a.ok()) return failed(a.status().Wrap(desc_));
    if (a->applied > port_->posted())
      return failed(Status(Errc::kProtocol, desc_ + ": ack for a step never sent"));
    if (a->epoch == port_->epoch() && a->applied > best) best = a->applied;
    off += channel::kAckFrameBytes;
  }
  if (off > 0) {
    std::memmove(ackBuf_.data(), ackBuf_.data() + off, ackFill_ - off);
    ackFill_ -= off;
  }
  if (best > 0) markHeard();
  if (best > heldAck_.load(std::memory_order_relaxed)) {
    heldAck_.store(best);
    publishAcks();
  }
}

// ---------------------------------------------------------------- receiver

SocketRecvPath::SocketRecvPath(SocketEngine* engine, UniqueFd fd, channel::RecvPort* port, std::string desc,
                               uint64_t ackedBefore)
    : engine_(engine),
      fd_(std::move(fd)),
      port_(port),
      desc_(std::move(desc)),
      acked_(std::min(ackedBefore, port->applied())),
      inlineAckFrames_(params::InlineSendMaxBytes() > 0),
      lazyAckMaxBytes_(static_cast<size_t>(std::max<int64_t>(0, params::LazyAckMaxBytes()))),
      ackEvery_(std::max<uint64_t>(1, port->slots() / 2)),
      // A migrated path acknowledges the applied step at once (the old path's acks may be lost).
      flushAcks_(acked_.load() < port->applied()),
      ackQueued_(acked_.load()),
      ackDone_(acked_.load()),
      ackNow_(new std::atomic<bool>[port->slots()]) {
  // A migrated path never saw the headers of the steps the old path received: whether their
  // sender waits for their ack (a direct step, a large one) was known only there. Each such step
  // is acked at once when applied; a step this path receives sets its slot's flag anew. Left
  // lazy, an ack the sender waits for would go only when the engine idles for a millisecond,
  // which a busy other channel on the same engine can put off for a whole call.
  const bool migrated = ackedBefore != UINT64_MAX;
  for (uint32_t i = 0; i < port->slots(); ++i)
    ackNow_[i].store(lazyAckMaxBytes_ == 0 || migrated, std::memory_order_relaxed);
  recvOp_.owner = this;
  recvOp_.kind = kRecv;
  stage_.resize(kStageBytes);
  ackOp_.owner = this;
  ackOp_.kind = kAckSend;
}

SocketRecvPath::~SocketRecvPath() { engine_->remove(this); }

void SocketRecvPath::quiesce() noexcept {
  dead_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

void SocketRecvPath::abandon() noexcept { abortTcp(fd_.get()); }

bool SocketRecvPath::handOver(channel::Path& next) noexcept { return handOverOnEngine(engine_, this, next); }

void SocketRecvPath::failed(const Status& s) {
  if (dead_.exchange(true) || port_->replacedPath(this, s, kLogNet)) return;
  if (in_.phase == Phase::kHeader && stageLen_ == stageOff_)
    RECCL_INFO(kLogNet, "%s", s.message().c_str());
  else
    RECCL_WARN(kLogNet, "%s", s.message().c_str());
  port_->pathFailed(this, false, s);
}

void SocketRecvPath::pump(SocketEngine& engine) {
  if (dead_) return;
  if (!recvOp_.inflight) {
    io_uring_sqe* s = engine.sqe(recvOp_);
    if (s) {
      size_t left = in_.want - in_.got;
      if (in_.phase == Phase::kPayload && stageLen_ == stageOff_ && left >= kStageBytes / 2) {
        recvIntoSlot_ = true;
        // One I/O chunk at a time, as for sends: each retry of a waiting receive copies what has
        // arrived on this thread, up to the whole rest of the step.
        size_t cap = engine.ioChunkBytes();
        if (cap && left > cap) left = cap;
        io_uring_prep_recv(s, fd_.get(), payload_ + in_.got, left, MSG_WAITALL);
        engine.noteSubmit(left);
      } else {
        if (stageOff_ > 0) {  // keep the unconsumed tail at the front
          std::memmove(stage_.data(), stage_.data() + stageOff_, stageLen_ - stageOff_);
          stageLen_ -= stageOff_;
          stageOff_ = 0;
        }
        recvIntoSlot_ = false;
        size_t room = stage_.size() - stageLen_;
        if (in_.phase == Phase::kHeader && lastStepLarge_ && stageLen_ < hdr_.size())
          room = hdr_.size() - stageLen_;
        io_uring_prep_recv(s, fd_.get(), stage_.data() + stageLen_, room, 0);
      }
    }
  }
  if (flushRequested_.exchange(false, std::memory_order_acq_rel)) flushAcks_ = true;
  // An inline acker holds the lock only while it sends; it kicks us when it leaves work behind.
  std::unique_lock lk(ackMu_, std::try_to_lock);
  if (!ackOp_.inflight && lk.owns_lock()) {
    uint64_t acked = acked_.load(std::memory_order_relaxed);
    if (ackSentBytes_ == 0) {
      uint64_t applied = port_->applied();
      if (applied > acked && (flushAcks_ || ackDue(applied, acked))) {
        channel::AckFrame a{port_->epoch(), applied};
        channel::encodeAck(a, std::span<std::byte, channel::kAckFrameBytes>(ackBuf_.data(), ackBuf_.size()));
        ackInFlightValue_ = applied;
        ackQueued_.store(applied, std::memory_order_relaxed);
        flushAcks_ = false;
        engine.acksSent.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (ackInFlightValue_ > acked) {
      ackPending_ = true;
      if (io_uring_sqe* s = engine.sqe(ackOp_))
        io_uring_prep_send(s, fd_.get(), ackBuf_.data() + ackSentBytes_, ackBuf_.size() - ackSentBytes_,
                           MSG_NOSIGNAL);
    }
  }
}

bool SocketRecvPath::ackDue(uint64_t applied, uint64_t acked) const noexcept {
  if (applied <= acked) return false;
  if (applied - acked >= ackEvery_) return true;
  uint32_t slots = port_->slots();
  for (uint64_t s = acked + 1; s <= applied; ++s)
    if (ackNow_[(s - 1) % slots].load(std::memory_order_relaxed)) return true;
  return false;
}

void SocketRecvPath::notifyConsumed() noexcept {
  // Read on the algorithm's thread: a stale ackQueued_ can only cost a spare wake-up, or defer
  // an ack to the progress thread's next round (at most its short idle time away).
  uint64_t applied = port_->applied();
  if (!ackDue(applied, ackQueued_.load(std::memory_order_relaxed))) return;
  if (!sendAckInline(applied)) engine_->kick();
}

bool SocketRecvPath::sendAckInline(uint64_t applied) noexcept {
  // One send from this thread costs less than waking the progress thread (an eventfd write, a
  // context switch on a machine with few CPUs, an io_uring turn) for a 24-byte frame.
  if (!inlineAckFrames_) return false;
  std::unique_lock lk(ackMu_, std::try_to_lock);
  // The progress thread is on the acks now, or has one on its way: it sends the newer one next.
  if (!lk.owns_lock() || ackPending_) {
    engine_->acksLeftToProgress.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (dead_.load(std::memory_order_relaxed)) return false;
  if (applied <= acked_.load(std::memory_order_relaxed)) return true;
  channel::AckFrame a{port_->epoch(), applied};
  std::array<std::byte, channel::kAckFrameBytes> frame{};
  channel::encodeAck(a, std::span<std::byte, channel::kAckFrameBytes>(frame.data(), frame.size()));
  ssize_t n = ::send(fd_.get(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  // No room or an error: the progress thread sends it and reports any failure.
  if (n <= 0) return false;
  engine_->acksSent.fetch_add(1, std::memory_order_relaxed);
  ackQueued_.store(applied, std::memory_order_relaxed);
  if (static_cast<size_t>(n) < frame.size()) {
    // The socket took part of it: the progress thread sends the rest from ackBuf_.
    ackBuf_ = frame;
    ackSentBytes_ = static_cast<size_t>(n);
    ackInFlightValue_ = applied;
    ackPending_ = true;
    return false;
  }
  ackInFlightValue_ = applied;
  settlePriority(fd_.get(), urgentAbove_, applied);
  acked_.store(applied, std::memory_order_relaxed);
  ackDone_.store(applied, std::memory_order_release);
  engine_->inlineAcks.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool SocketRecvPath::flush() noexcept {
  if (dead_.load(std::memory_order_relaxed) || ackDone_.load(std::memory_order_acquire) >= port_->applied())
    return true;
  flushRequested_.store(true, std::memory_order_release);
  engine_->kick();
  return false;
}

bool SocketRecvPath::hasDeferredWork() const noexcept {
  return !dead_.load(std::memory_order_relaxed) && port_->received() > acked_.load(std::memory_order_relaxed);
}

void SocketRecvPath::publish() {
  // Header last into the slot, then the counter: the receiver reads both after `received`.
  std::memcpy(port_->memory().slotFrame(in_.step.step), hdr_.data(), hdr_.size());
  if (direct_) port_->onLandedDirect(in_.step.step);
  direct_ = false;
  lastStepLarge_ = in_.step.bytes >= kStageBytes / 2;
  in_.done();
  markHeard();
  port_->onReceived(in_.step.step);
}

bool SocketRecvPath::onHeader() {
  // Decoded, judged (exactly once: duplicates and stale frames dropped) and checked against the
  // slot window as on every path (channel/recv_framing.h).
  Status err;
  switch (in_.begin(*port_, hdr_, desc_, &err)) {
    case channel::StepArrival::Kind::kError: failed(err); return false;
    case channel::StepArrival::Kind::kDrop: return true;
    case channel::StepArrival::Kind::kNext: break;
  }
  // Before the step is published (its reader decides on its release whether to wake us).
  ackNow_[(in_.step.step - 1) % port_->slots()].store(
      lazyAckMaxBytes_ == 0 || in_.step.bytes > lazyAckMaxBytes_ || (in_.step.flags & channel::kStepFlagAckNow) != 0,
      std::memory_order_relaxed);
  if (in_.want == 0) {
    direct_ = false;
    publish();
  } else {
    // The payload goes where the algorithm will want it when it said so in time (RecvPort::
    // expectDirect), else into the slot.
    std::byte* target = port_->directTarget(in_.step.step, in_.want);
    direct_ = target != nullptr;
    payload_ = direct_ ? target : port_->memory().slotPayload(in_.step.step);
  }
  return true;
}

bool SocketRecvPath::consumeStage() {
  for (;;) {
    size_t avail = stageLen_ - stageOff_;
    const std::byte* p = stage_.data() + stageOff_;
    switch (in_.phase) {
      case Phase::kHeader:
        if (avail < hdr_.size()) return true;
        std::memcpy(hdr_.data(), p, hdr_.size());
        stageOff_ += hdr_.size();
        if (!onHeader()) return false;
        break;
      case Phase::kPayload: {
        size_t take = std::min(avail, in_.want - in_.got);
        if (take) std::memcpy(payload_ + in_.got, p, take);
        stageOff_ += take;
        in_.got += take;
        if (in_.got < in_.want) return true;
        publish();
        break;
      }
      case Phase::kDrain: {
        size_t take = std::min(avail, in_.want - in_.got);
        stageOff_ += take;
        in_.got += take;
        if (in_.got < in_.want) return true;
        in_.done();
        break;
      }
    }
  }
}

void SocketRecvPath::complete(SocketEngine& engine, IoOp& op, int res) {
  if (dead_) return;
  if (op.kind == kAckSend) {
    if (res <= 0) {
      if (res == -EAGAIN || res == -EINTR) return;
      return failed(ioError(res == 0 ? -EPIPE : res, desc_, "sending acks"));
    }
    std::lock_guard lk(ackMu_);
    ackSentBytes_ += static_cast<size_t>(res);
    if (ackSentBytes_ >= ackBuf_.size()) {
      ackSentBytes_ = 0;
      ackPending_ = false;
      settlePriority(fd_.get(), urgentAbove_, ackInFlightValue_);
      acked_.store(ackInFlightValue_, std::memory_order_relaxed);
      ackDone_.store(ackInFlightValue_, std::memory_order_release);
    }
    return;
  }
  if (res <= 0) {
    if (res == -EAGAIN || res == -EINTR) return;
    return failed(ioError(res, desc_, "receiving"));
  }
  engine.bytesReceived.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
  if (recvIntoSlot_) {
    in_.got += static_cast<size_t>(res);
    if (in_.got >= in_.want) publish();
    return;
  }
  stageLen_ += static_cast<size_t>(res);
  consumeStage();
}

namespace {
SocketEngine* engineOf(channel::Path& p) noexcept {
  if (auto* s = dynamic_cast<SocketSendPath*>(&p)) return s->engine();
  if (auto* r = dynamic_cast<SocketRecvPath*>(&p)) return r->engine();
  return nullptr;
}
}  // namespace

// ---------------------------------------------------------------- liveness

LivenessPath::LivenessPath(SocketEngine* engine, UniqueFd fd, channel::PortBase* port, bool isSender)
    : engine_(engine), fd_(std::move(fd)), port_(port), isSender_(isSender) {
  op_.owner = this;
  op_.kind = kWatch;
}

LivenessPath::~LivenessPath() { engine_->remove(this); }

std::string LivenessPath::describe() const {
  return "side channel of rank " + std::to_string(port_->id().peer) + (isSender_ ? " (sender)" : " (receiver)");
}

void LivenessPath::quiesce() noexcept {
  dead_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

void LivenessPath::pump(SocketEngine& engine) {
  if (dead_ || op_.inflight) return;
  if (io_uring_sqe* s = engine.sqe(op_)) io_uring_prep_recv(s, fd_.get(), buf_.data(), buf_.size(), 0);
}

void LivenessPath::complete(SocketEngine& engine, IoOp& op, int res) {
  if (dead_) return;
  if (res > 0 || res == -EAGAIN || res == -EINTR) return;  // nothing is sent here; ignore
  if (dead_.exchange(true)) return;
  // nullptr: this socket only watches the peer; it is not the port's path.
  port_->pathFailed(nullptr, isSender_,
                    Status(Errc::kPeerFailure, "shared-memory peer rank " + std::to_string(port_->id().peer) +
                                                   " is gone (side channel closed)"));
}

}  // namespace reccl::transport
