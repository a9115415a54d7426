#include "transport/socket_paths.h"

#include <sys/socket.h>

#include <cstring>

#include "reccl/common/log.h"

namespace reccl::transport {
namespace {

enum OpKind { kSend = 1, kAckRecv = 2, kRecv = 3, kAckSend = 4, kWatch = 5 };

Status ioError(int res, const std::string& desc, const char* what) {
  if (res == 0) return Status(Errc::kPeerFailure, desc + ": connection closed by peer while " + what);
  int err = -res;
  Errc code = (err == ECONNRESET || err == EPIPE) ? Errc::kPeerFailure : Errc::kLinkFailure;
  return Status(code, desc + ": " + what + " failed: " + strerror(err));
}

}  // namespace

// ---------------------------------------------------------------- sender

SocketSendPath::SocketSendPath(SocketEngine* engine, UniqueFd fd, channel::SendPort* port, std::string desc)
    : engine_(engine), fd_(std::move(fd)), port_(port), desc_(std::move(desc)), sent_(port->posted()) {
  sendOp_.owner = this;
  sendOp_.kind = kSend;
  ackOp_.owner = this;
  ackOp_.kind = kAckRecv;
  iov_.reserve(port->slots());
}

SocketSendPath::~SocketSendPath() { engine_->remove(this); }

void SocketSendPath::quiesce() noexcept {
  dead_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

void SocketSendPath::failed(const Status& s) {
  if (dead_.exchange(true)) return;
  // A peer that finished and closed leaves an idle connection behind: not worth a warning.
  if (port_->acked() == port_->posted())
    RECCL_INFO(kLogNet, "%s", s.message().c_str());
  else
    RECCL_WARN(kLogNet, "%s", s.message().c_str());
  port_->pathFailed(true, s);
}

void SocketSendPath::pump(SocketEngine& engine) {
  if (dead_) return;
  if (!sendOp_.inflight) {
    if (batchEnd_ == 0) {
      uint64_t posted = port_->posted();
      if (posted > sent_) {
        iov_.clear();
        iovFirst_ = 0;
        for (uint64_t s = sent_ + 1; s <= posted; ++s) {
          auto f = port_->frame(s);
          iov_.push_back({const_cast<std::byte*>(f.data()), f.size()});
        }
        batchEnd_ = posted;
      }
    }
    if (batchEnd_ != 0) {
      msg_ = {};
      msg_.msg_iov = iov_.data() + iovFirst_;
      msg_.msg_iovlen = iov_.size() - iovFirst_;
      if (io_uring_sqe* s = engine.sqe(sendOp_)) io_uring_prep_sendmsg(s, fd_.get(), &msg_, MSG_NOSIGNAL);
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
    size_t left = static_cast<size_t>(res);
    while (left > 0 && iovFirst_ < iov_.size()) {
      iovec& v = iov_[iovFirst_];
      if (left >= v.iov_len) {
        left -= v.iov_len;
        ++iovFirst_;
      } else {
        v.iov_base = static_cast<char*>(v.iov_base) + left;
        v.iov_len -= left;
        left = 0;
      }
    }
    if (iovFirst_ == iov_.size()) {
      sent_ = batchEnd_;
      batchEnd_ = 0;
    }
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
  if (best) port_->onAck(best);
}

// ---------------------------------------------------------------- receiver

SocketRecvPath::SocketRecvPath(SocketEngine* engine, UniqueFd fd, channel::RecvPort* port, std::string desc)
    : engine_(engine), fd_(std::move(fd)), port_(port), desc_(std::move(desc)), acked_(port->applied()) {
  recvOp_.owner = this;
  recvOp_.kind = kRecv;
  ackOp_.owner = this;
  ackOp_.kind = kAckSend;
}

SocketRecvPath::~SocketRecvPath() { engine_->remove(this); }

void SocketRecvPath::quiesce() noexcept {
  dead_ = true;
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

void SocketRecvPath::failed(const Status& s) {
  if (dead_.exchange(true)) return;
  if (phase_ == Phase::kHeader && got_ == 0)
    RECCL_INFO(kLogNet, "%s", s.message().c_str());
  else
    RECCL_WARN(kLogNet, "%s", s.message().c_str());
  port_->pathFailed(false, s);
}

void SocketRecvPath::pump(SocketEngine& engine) {
  if (dead_) return;
  if (!recvOp_.inflight) {
    io_uring_sqe* s = engine.sqe(recvOp_);
    if (s) {
      switch (phase_) {
        case Phase::kHeader:
          io_uring_prep_recv(s, fd_.get(), hdr_.data() + got_, hdr_.size() - got_, 0);
          break;
        case Phase::kPayload:
          io_uring_prep_recv(s, fd_.get(), port_->memory().slotPayload(cur_.step) + got_, want_ - got_,
                             MSG_WAITALL);
          break;
        case Phase::kDrain:
          io_uring_prep_recv(s, fd_.get(), drain_.data(), std::min(drain_.size(), want_ - got_), 0);
          break;
      }
    }
  }
  if (!ackOp_.inflight) {
    if (ackSentBytes_ == 0) {
      uint64_t applied = port_->applied();
      if (applied > acked_) {
        channel::AckFrame a{port_->epoch(), applied};
        channel::encodeAck(a, std::span<std::byte, channel::kAckFrameBytes>(ackBuf_.data(), ackBuf_.size()));
        ackInFlightValue_ = applied;
      }
    }
    if (ackInFlightValue_ > acked_) {
      if (io_uring_sqe* s = engine.sqe(ackOp_))
        io_uring_prep_send(s, fd_.get(), ackBuf_.data() + ackSentBytes_, ackBuf_.size() - ackSentBytes_,
                           MSG_NOSIGNAL);
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
    ackSentBytes_ += static_cast<size_t>(res);
    if (ackSentBytes_ >= ackBuf_.size()) {
      ackSentBytes_ = 0;
      acked_ = ackInFlightValue_;
    }
    return;
  }
  if (res <= 0) {
    if (res == -EAGAIN || res == -EINTR) return;
    return failed(ioError(res, desc_, "receiving"));
  }
  engine.bytesReceived.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
  got_ += static_cast<size_t>(res);
  switch (phase_) {
    case Phase::kHeader: {
      if (got_ < hdr_.size()) return;
      auto h = channel::decodeStepHeader(std::span<const std::byte>(hdr_.data(), hdr_.size()));
      if (!h.ok()) return failed(h.status().Wrap(desc_));
      cur_ = *h;
      got_ = 0;
      uint64_t received = port_->received();
      auto verdict = channel::classifyStep(cur_, received, port_->epoch(),
                                           static_cast<uint32_t>(port_->chunkBytes()));
      if (verdict == channel::StepVerdict::kBad)
        return failed(Status(Errc::kProtocol, desc_ + ": unexpected step " + std::to_string(cur_.step) +
                                                  " epoch " + std::to_string(cur_.epoch) + " (" +
                                                  std::to_string(cur_.bytes) + " bytes)"));
      if (verdict != channel::StepVerdict::kNext) {
        // Exactly once: a step already received, or one from a retired path, is read and dropped.
        if (verdict == channel::StepVerdict::kDuplicate) {
          if (auto* env = port_->env()) env->duplicateSteps.fetch_add(1);
        } else if (auto* env = port_->env()) {
          env->staleSteps.fetch_add(1);
        }
        want_ = cur_.bytes;
        if (want_ == 0) return;
        if (drain_.empty()) drain_.resize(64 * 1024);
        phase_ = Phase::kDrain;
        return;
      }
      if (cur_.step > port_->applied() + port_->slots())
        return failed(Status(Errc::kProtocol, desc_ + ": sender overran the slot window"));
      want_ = cur_.bytes;
      if (want_ == 0) break;
      phase_ = Phase::kPayload;
      return;
    }
    case Phase::kPayload:
      if (got_ < want_) return;
      break;
    case Phase::kDrain:
      if (got_ < want_) return;
      phase_ = Phase::kHeader;
      got_ = 0;
      return;
  }
  // A complete step: publish header then counter.
  std::memcpy(port_->memory().slotFrame(cur_.step), hdr_.data(), hdr_.size());
  phase_ = Phase::kHeader;
  got_ = 0;
  port_->onReceived(cur_.step);
}

// ---------------------------------------------------------------- liveness

LivenessPath::LivenessPath(SocketEngine* engine, UniqueFd fd, channel::PortBase* port, bool isSender)
    : engine_(engine), fd_(std::move(fd)), port_(port), isSender_(isSender) {
  op_.owner = this;
  op_.kind = kWatch;
}

LivenessPath::~LivenessPath() { engine_->remove(this); }

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
  port_->pathFailed(isSender_, Status(Errc::kPeerFailure, "shared-memory peer rank " + std::to_string(port_->id().peer) +
                                                              " is gone (side channel closed)"));
}

}  // namespace reccl::transport
