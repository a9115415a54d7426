#include "failover/relay/relay_paths.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "channel/recv_framing.h"
#include "failover/thread_sched.h"
#include "reccl/common/log.h"

namespace reccl::failover {

RelayPathBase::RelayPathBase(RelayLink link, channel::PortBase* port, std::string desc, bool isSender)
    : link_(std::move(link)), base_(port), desc_(std::move(desc)), isSender_(isSender) {}

RelayPathBase::~RelayPathBase() { stop(); }

void RelayPathBase::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "reccl-relay");  // first: until now it is "reccl-migrator"
    dropToNormalScheduling();  // started by a migrator, which may run at FIFO (thread_sched.h)
    run();
  });
}

void RelayPathBase::shutdown() noexcept {
  dead_.store(true);
  link_.pipe.wakeOrigin();
  // The relay sees its end of the control socket close and drops its connection to the peer.
  if (link_.ctrl) ::shutdown(link_.ctrl.get(), SHUT_RDWR);
}

void RelayPathBase::stop() noexcept {
  shutdown();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void RelayPathBase::failed(const Status& s) {
  // A path the port no longer uses (failover replaced it: the peer closing the relay's socket is
  // how that looks from here) failing is expected, not a fault (see PortBase::pathFailed).
  if (dead_.exchange(true) || base_->replacedPath(this, s, kLogFailover)) return;
  RECCL_WARN(kLogFailover, "%s", s.message().c_str());
  base_->pathFailed(this, isSender_, s);
}

void RelayPathBase::run() {
  int wakeFd = link_.pipe.originWakeFd();
  while (!dead_.load()) {
    RelayPipe::drainWake(wakeFd);
    if (progress()) continue;
    if (dead_.load()) break;
    // Checked only when nothing is left to move: bytes the relay read before the break count.
    uint32_t br = link_.pipe.shared()->broken.load(std::memory_order_acquire);
    if (br != 0) {
      // The peer closing its end is not a link fault: it migrated the connection or is gone.
      bool peer = br == static_cast<uint32_t>(RelayBreak::kPeerClosed);
      failed(Status(peer ? Errc::kPeerFailure : Errc::kLinkFailure,
                    desc_ + ": relay rank " + std::to_string(link_.via) +
                        (peer ? " saw the peer close the connection" : " lost its connection to the peer")));
      break;
    }
    pollfd pf[2] = {{wakeFd, POLLIN, 0}, {link_.ctrl.get(), POLLIN, 0}};
    int rc = ::poll(pf, 2, 100);
    if (rc < 0 && errno != EINTR) {
      failed(Status::FromErrno(errno, desc_ + ": poll"));
      break;
    }
    if (rc > 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) && !dead_.load()) {
      failed(Status(Errc::kLinkFailure, desc_ + ": relay rank " + std::to_string(link_.via) + " closed the pipe"));
      break;
    }
  }
  // A retired path's control socket is shut down already (shutdown()). A failed one keeps it:
  // the relay holds its connection to the peer, unused, until failover retires this path after
  // the move that replaces it reached the peer; a close now would reach the peer first, where a
  // close with no move under way reads as this rank's end (docs/failover.md, "Faults and ends").
  // A retired or failed path stays with its port until the port goes: give the rings back now.
  link_.pipe.unmap();
}

// ---------------------------------------------------------------- sender

RelaySendPath::RelaySendPath(RelayLink link, channel::SendPort* port, std::string desc, uint64_t sentBefore)
    : RelayPathBase(std::move(link), port, std::move(desc), true),
      port_(port),
      // Never below the acknowledged step: those slots may hold later steps by now.
      sent_(std::max(std::min(sentBefore, port->posted()), port->acked())) {}

bool RelaySendPath::progress() {
  bool moved = false;
  auto up = link_.pipe.up();
  uint64_t posted = port_->posted();
  uint32_t epoch = port_->epoch();
  // Looked at per step: a path shut down writes nothing more into its pipe.
  while (sent_ < posted && !dead_.load()) {
    auto f = port_->frame(sent_ + 1);
    // Resent steps still carry the old path's epoch in their slot header: this path writes a
    // copy with its own.
    if (partial_ == 0) {
      std::memcpy(header_.data(), f.data(), header_.size());
      channel::stampFrameEpoch(header_.data(), epoch);
    }
    size_t n = 0;
    if (partial_ < header_.size()) n = up.write(std::span<const std::byte>(header_).subspan(partial_));
    if (partial_ + n >= header_.size()) n += up.write(f.subspan(partial_ + n));
    moved |= n > 0;
    partial_ += n;
    if (partial_ < f.size()) break;
    partial_ = 0;
    ++sent_;
  }
  auto down = link_.pipe.down();
  uint64_t best = 0;
  while (down.used() >= ack_.size()) {
    down.read(ack_);
    moved = true;
    auto a = channel::decodeAck(ack_);
    if (!a.ok()) {
      failed(a.status().Wrap(desc_));
      return false;
    }
    if (a->applied > port_->posted()) {
      failed(Status(Errc::kProtocol, desc_ + ": ack for a step never sent"));
      return false;
    }
    if (a->epoch == port_->epoch() && a->applied > best) best = a->applied;
  }
  // Never beyond the steps written whole: the receiver can have a step this path is still
  // resending (see SocketSendPath::heldAck_), and the ack would free its slot for reuse.
  heldAck_ = std::max(heldAck_, best);
  if (std::min(heldAck_, sent_) > port_->acked()) {
    markHeard();
    port_->onAck(std::min(heldAck_, sent_));
  }
  if (moved) link_.pipe.wakeRelay();
  return moved;
}

// ---------------------------------------------------------------- receiver

RelayRecvPath::RelayRecvPath(RelayLink link, channel::RecvPort* port, std::string desc)
    : RelayPathBase(std::move(link), port, std::move(desc), false), port_(port) {}

bool RelayRecvPath::onHeader() {
  // The same framing as every path's (channel/recv_framing.h).
  Status err;
  if (in_.begin(*port_, hdr_, desc_, &err) != channel::StepArrival::Kind::kError) return true;
  failed(err);
  return false;
}

bool RelayRecvPath::progress() {
  bool moved = false;
  auto down = link_.pipe.down();
  for (;;) {
    if (in_.phase == Phase::kHeader) {
      if (!down.peek(hdr_)) break;
      down.consumed(hdr_.size());
      moved = true;
      if (!onHeader()) return false;
    }
    if (in_.phase == Phase::kPayload || in_.phase == Phase::kDrain) {
      while (in_.got < in_.want) {
        auto r = down.readable();
        size_t n = std::min(r.size(), in_.want - in_.got);
        if (n == 0) break;
        if (in_.phase == Phase::kPayload)
          std::memcpy(port_->memory().slotPayload(in_.step.step) + in_.got, r.data(), n);
        down.consumed(n);
        in_.got += n;
        moved = true;
      }
      if (in_.got < in_.want) break;
      if (in_.phase == Phase::kPayload) {
        // Header last into the slot, then the counter: the receiver reads both after `received`.
        std::memcpy(port_->memory().slotFrame(in_.step.step), hdr_.data(), hdr_.size());
        markHeard();
        port_->onReceived(in_.step.step);
      }
      in_.done();
    }
  }
  if (ackOff_ == ackOut_.size()) {
    uint64_t applied = port_->applied();
    if (applied > acked_) {
      channel::encodeAck(channel::AckFrame{port_->epoch(), applied}, ackOut_);
      ackOff_ = 0;
      acked_ = applied;
    }
  }
  if (ackOff_ < ackOut_.size()) {
    size_t n = link_.pipe.up().write(std::span<const std::byte>(ackOut_).subspan(ackOff_));
    ackOff_ += n;
    moved |= n > 0;
  }
  if (moved) link_.pipe.wakeRelay();
  return moved;
}

}  // namespace reccl::failover
