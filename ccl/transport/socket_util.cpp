#include "transport/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "reccl/common/log.h"

namespace reccl::transport {
namespace {

Status aborted(const std::string& what) { return Status(Errc::kAborted, what + ": aborted"); }

Status waitFd(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, deadline.pollSliceMs());
    if (rc > 0) return Status::Ok();
    if (rc == 0) {
      if (deadline.cancelled()) return aborted(what);
      if (!deadline.expired()) continue;  // a slice of a cancellable deadline
      return Status(Errc::kTimeout, std::string(what) + ": deadline passed");
    }
    if (errno != EINTR) return Status::FromErrno(errno, what);
  }
}

// A connection to a port in the ephemeral range that nobody listens on yet can be given that very
// port as its source and open onto itself (TCP simultaneous open); it is no peer.
bool connectedToItself(int fd) {
  sockaddr_in local{}, peer{};
  socklen_t ll = sizeof(local), pl = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
    return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

}  // namespace

std::string Endpoint::str() const {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{addr};
  inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(port);
}

Result<uint32_t> parseIpv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return Status(Errc::kInvalidArgument, "not an IPv4 address: " + text);
  return a.s_addr;
}

Result<uint32_t> resolveIpv4(const std::string& host) {
  auto direct = parseIpv4(host);
  if (direct.ok()) return direct;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) return Status(Errc::kNotFound, "cannot resolve " + host + ": " + gai_strerror(rc));
  uint32_t a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return a;
}

Result<UniqueFd> listenTcp(uint32_t addr, uint16_t port, Endpoint* bound) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status::FromErrno(errno, "socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = addr;
  sa.sin_port = htons(port);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return Status::FromErrno(errno, "bind " + Endpoint{addr, port}.str());
  if (listen(fd.get(), 512) != 0) return Status::FromErrno(errno, "listen");
  socklen_t len = sizeof(sa);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return Status::FromErrno(errno, "getsockname");
  if (bound) *bound = Endpoint{sa.sin_addr.s_addr, ntohs(sa.sin_port)};
  return fd;
}

Result<UniqueFd> connectTcp(const Endpoint& dst, uint32_t srcAddr, const std::string& device, Deadline deadline,
                            OnRefused onRefused) {
  int backoffMs = 1;
  int attemptMs = kConnectAttemptMs;
  for (;;) {
    if (deadline.cancelled()) return aborted("connect " + dst.str());
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return Status::FromErrno(errno, "socket");
    if (!device.empty()) {
      if (setsockopt(fd.get(), SOL_SOCKET, SO_BINDTODEVICE, device.c_str(), device.size()) != 0 && errno != EPERM)
        RECCL_WARN(kLogNet, "so_bindtodevice %s: %s", device.c_str(), strerror(errno));
    }
    if (srcAddr != 0) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_addr.s_addr = srcAddr;
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0)
        return Status::FromErrno(errno, "bind source " + Endpoint{srcAddr, 0}.str());
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = dst.addr;
    sa.sin_port = htons(dst.port);
    int rc = connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // A lost SYN is sent again only after the kernel's initial RTO (1 s), a large share of a
      // failover's deadline: an attempt unanswered within attemptMs is dialled anew instead, each
      // unanswered one given twice the time of the one before, so a slow peer is not dialled ever
      // faster. An answer (even a refusal) starts the next dial at kConnectAttemptMs again.
      const Deadline byAttempt = deadline.within(attemptMs);
      const bool attemptEndsFirst = byAttempt.at() < deadline.at();
      Status w = waitFd(fd.get(), POLLOUT, byAttempt, ("connect " + dst.str()).c_str());
      if (!w.ok() && w.code() == Errc::kTimeout && attemptEndsFirst) {
        pollfd last{fd.get(), POLLOUT, 0};  // answered just now: keep it
        if (::poll(&last, 1, 0) != 1) {
          RECCL_INFO(kLogNet, "connect %s: unanswered after %d ms, dialling again", dst.str().c_str(), attemptMs);
          attemptMs = std::min(attemptMs * 2, kConnectAttemptMaxMs);
          continue;  // the socket closes: a late SYN-ACK to it meets a reset
        }
        w = Status::Ok();
      }
      attemptMs = kConnectAttemptMs;
      RECCL_TRY(w);
      socklen_t len = sizeof(err);
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0 && connectedToItself(fd.get())) {
      closeAbruptly(fd);  // a reset, no TIME_WAIT left on the port the peer is about to bind
      err = ECONNREFUSED;  // the peer does not listen yet
    }
    if (err == 0) {
      int fl = fcntl(fd.get(), F_GETFL);
      fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
      return fd;
    }
    if (err == ECONNREFUSED && onRefused == OnRefused::kFinal)
      return Status(Errc::kPeerFailure, "connect " + dst.str() + ": refused (nothing listens there)");
    if (deadline.cancelled()) return aborted("connect " + dst.str());
    if ((err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH) || deadline.expired())
      return Status::FromErrno(err, "connect " + dst.str());
    // A cancellable deadline is looked at within its poll slice here too.
    const int slice = deadline.pollSliceMs();
    std::this_thread::sleep_for(std::chrono::milliseconds(slice < 0 ? backoffMs : std::min(backoffMs, slice)));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

Result<UniqueFd> acceptTcp(int listenFd, Deadline deadline) {
  RECCL_TRY(waitFd(listenFd, POLLIN, deadline, "accept"));
  UniqueFd fd(accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return Status::FromErrno(errno, "accept");
  return fd;
}

Status sendAll(int fd, std::span<const std::byte> data, Deadline deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RECCL_TRY(waitFd(fd, POLLOUT, deadline, "send"));
      continue;
    }
    return Status::FromErrno(n < 0 ? errno : EPIPE, "send");
  }
  return Status::Ok();
}

Status recvAll(int fd, std::span<std::byte> data, Deadline deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = recv(fd, data.data() + off, data.size() - off, MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(Errc::kPeerFailure, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RECCL_TRY(waitFd(fd, POLLIN, deadline, "recv"));
      continue;
    }
    return Status::FromErrno(errno, "recv");
  }
  return Status::Ok();
}

ByteIo socketIo(int fd, Deadline deadline) {
  return ByteIo{[fd, deadline](std::span<const std::byte> b) { return sendAll(fd, b, deadline); },
                [fd, deadline](std::span<std::byte> b) { return recvAll(fd, b, deadline); }};
}

void abortTcp(int fd) noexcept {
  sockaddr sa{};
  sa.sa_family = AF_UNSPEC;
  [[maybe_unused]] int rc = ::connect(fd, &sa, sizeof(sa));
}

void closeAbruptly(UniqueFd& fd) noexcept {
  if (!fd) return;
  linger lg{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  fd.reset();
}

void tuneDataSocket(int fd, const std::string& device) noexcept {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Plain SO_SNDBUF/SO_RCVBUF would cap the buffers at net.core.[rw]mem_max (~208 KiB by default)
  // and switch off autotuning (up to tcp_[rw]mem max, 4-6 MiB); the FORCE variants (root) set
  // large buffers for sure. Without privileges, autotuning is the better choice.
  int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
  (void)device;
}

bool setSocketPriority(int fd, int prio) noexcept {
  return setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio)) == 0;
}

}  // namespace reccl::transport
