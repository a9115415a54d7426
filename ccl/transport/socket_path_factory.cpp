#include "transport/socket_path_factory.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "transport/socket_paths.h"
#include "transport/socket_util.h"
#include "transport/tcp_health.h"

namespace reccl::transport {
namespace {

// The socket under a path this transport made (-1: another kind of path).
int socketOf(const channel::Path& p) noexcept {
  if (auto* s = dynamic_cast<const SocketSendPath*>(&p)) return s->fd();
  if (auto* r = dynamic_cast<const SocketRecvPath*>(&p)) return r->fd();
  return -1;
}

// A failover link: its handshake, and the resend of the path made of it, are what the whole
// collective waits for after a fault, while the NIC they leave from is busy with its own
// channels' bulk traffic; at a raised priority they pass that traffic where the host's queues
// honour it (pfifo_fast's first band, an mqprio traffic class). The path goes back to normal
// priority once a step posted after the move is acknowledged.
class SocketLink final : public Link {
 public:
  SocketLink(SocketEngine* engine, UniqueFd fd, int priority)
      : engine_(engine), fd_(std::move(fd)), priority_(priority > 0 && setSocketPriority(fd_.get(), priority)) {}
  ByteIo io(Deadline deadline) override { return socketIo(fd_.get(), deadline); }
  void keepIdle() noexcept override { armIdleKeepalive(fd_.get()); }
  bool alive() const noexcept override { return fd_ && idleSocketAlive(fd_.get()); }
  int waitFd() const noexcept override { return fd_.get(); }
  bool hasInput() const noexcept override {
    std::byte peek;
    ssize_t n = ::recv(fd_.get(), &peek, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }
  void closeNow() noexcept override { closeAbruptly(fd_); }
  const char* transport() const noexcept override { return "tcp"; }
  std::unique_ptr<channel::Path> makePath(channel::PortBase& port, bool isSender, uint64_t after,
                                          std::string desc) override {
    if (isSender) {
      auto p = std::make_unique<SocketSendPath>(engine_, std::move(fd_), static_cast<channel::SendPort*>(&port),
                                                std::move(desc), after);
      if (priority_) p->normalPriorityAfterFirstNewStep();
      return p;
    }
    auto p = std::make_unique<SocketRecvPath>(engine_, std::move(fd_), static_cast<channel::RecvPort*>(&port),
                                              std::move(desc), after);
    if (priority_) p->normalPriorityAfterFirstNewStep();
    return p;
  }

 private:
  SocketEngine* engine_;
  UniqueFd fd_;
  bool priority_;  // the socket is at a raised priority
};

}  // namespace

Result<std::unique_ptr<Link>> SocketPathFactory::connect(int peer, int rail, Deadline deadline) {
  if (peer < 0 || static_cast<size_t>(peer) >= cfg_.peerNic.size() || rail < 0 ||
      static_cast<size_t>(rail) >= cfg_.nicAddr.size() || static_cast<size_t>(rail) >= cfg_.peerNic[peer].size())
    return Status(Errc::kInternal, "peer has no nic on rail " + std::to_string(rail));
  const std::string& dev = cfg_.nicName[rail];
  Endpoint dst{cfg_.peerNic[peer][rail], cfg_.peerPort[peer]};
  // The peer's listener lives from its set-up to its destruction: a refusal is final.
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd,
                         connectTcp(dst, cfg_.nicAddr[rail], dev == "lo" ? "" : dev, deadline, OnRefused::kFinal));
  // The options every data socket gets: the link becomes one.
  tuneDataSocket(fd.get(), dev);
  return std::unique_ptr<Link>(new SocketLink(cfg_.engine, std::move(fd), cfg_.linkPriority));
}

std::unique_ptr<Link> SocketPathFactory::accept(UniqueFd fd) {
  // Bound by the listener that accepted it, like every accepted data socket.
  tuneDataSocket(fd.get(), "");
  return std::make_unique<SocketLink>(cfg_.engine, std::move(fd), cfg_.linkPriority);
}

int SocketPathFactory::railOf(const channel::Path& path) const {
  int fd = socketOf(path);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return -1;
  int rail = -1;
  for (size_t r = 0; r < cfg_.nicAddr.size(); ++r)
    if (cfg_.nicAddr[r] == sa.sin_addr.s_addr) rail = static_cast<int>(r);
  return rail;
}

void SocketPathFactory::watch(const channel::Path& path, int64_t stallMs) const {
  if (int fd = socketOf(path); fd >= 0) armKeepalive(fd, stallMs);
}

PathSample SocketPathFactory::sample(const channel::Path& path, int64_t stallMs) const {
  PathSample out;
  TcpSample s = sampleTcp(socketOf(path));
  if (!s.ok) return out;
  out.known = true;
  out.stalled = tcpStalled(s, stallMs);
  out.quietMs = s.lastAckRecvMs;
  out.bytes = s.bytesAcked + s.bytesReceived;
  out.pathId = reinterpret_cast<uintptr_t>(&path);
  return out;
}

LossSample SocketPathFactory::loss(const channel::Path& path) const {
  LossSample out;
  TcpSample s = sampleTcp(socketOf(path));
  if (!s.ok || !s.lossCounted) return out;
  out.known = true;
  out.lost = s.totalRetrans - std::min(s.dsackDups, s.totalRetrans);
  out.sent = s.dataSegsOut;
  out.pathId = reinterpret_cast<uintptr_t>(&path);
  return out;
}

}  // namespace reccl::transport
