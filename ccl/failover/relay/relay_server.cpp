#include "failover/relay/relay_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <optional>

#include "core/handshake.h"
#include "core/wire.h"
#include "failover/relay/relay_wire.h"
#include "reccl/common/log.h"
#include "transport/socket_util.h"

namespace reccl::failover {
namespace {

constexpr int64_t kServeMs = 1000;  // the request follows the connect at once; connecting on a rail

sockaddr_un abstractAddr(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): scoped to the network namespace, i.e. to the testbed host,
  // and gone with the socket; nothing in the file system to clean up.
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

}  // namespace

std::string RelayServer::socketName(uint32_t pid, uint64_t commId, int rank) {
  char buf[80];
  snprintf(buf, sizeof(buf), "reccl-relay-%u-%016" PRIx64 "-%d", pid, commId, rank);
  return buf;
}

Result<std::unique_ptr<RelayServer>> RelayServer::create(RelayServerConfig cfg) {
  std::unique_ptr<RelayServer> s(new RelayServer(std::move(cfg)));
  s->listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s->listen_) return Status::FromErrno(errno, "relay: socket");
  socklen_t len = 0;
  auto name = socketName(s->cfg_.pid, s->cfg_.commId, s->cfg_.rank);
  sockaddr_un a = abstractAddr(name, &len);
  if (bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return Status::FromErrno(errno, "relay: bind @" + name);
  if (listen(s->listen_.get(), 16) != 0) return Status::FromErrno(errno, "relay: listen");
  s->stopEvent_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->stopEvent_) return Status::FromErrno(errno, "relay: eventfd");
  s->acceptor_ = std::thread([p = s.get()] { p->acceptLoop(); });
  return s;
}

RelayServer::~RelayServer() { stop(0); }

void RelayServer::acceptLoop() {
  pthread_setname_np(pthread_self(), "reccl-relaysrv");
  while (!stop_.load()) {
    pollfd pf[2] = {{stopEvent_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    int rc = ::poll(pf, 2, 200);
    if (stop_.load()) return;
    reap(false);
    if (rc <= 0 || !(pf[1].revents & POLLIN)) continue;
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd) serve(std::move(fd));
  }
}

void RelayServer::serve(UniqueFd ctrl) {
  // Only this user's processes may ask (the abstract socket is open to the whole network
  // namespace); they then prove the communicator's key like any connection.
  ucred cred{};
  socklen_t clen = sizeof(cred);
  if (getsockopt(ctrl.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != geteuid()) {
    RECCL_WARN(kLogFailover, "rank %d: relay request from uid %u refused: not this job's user", cfg_.rank, cred.uid);
    return;
  }
  auto nonce = core::sendChallenge(ctrl.get(), core::AuthPurpose::kRelay);
  if (!nonce.ok()) return;
  // One message: authenticated hello + open, with the pipe's memfd and the two eventfds attached.
  std::array<std::byte, core::kAuthHelloBytes + kRelayOpenBytes + 1> buf{};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(3 * sizeof(int))] = {};
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  pollfd pf{ctrl.get(), POLLIN, 0};
  if (::poll(&pf, 1, static_cast<int>(kServeMs)) <= 0) return;
  ssize_t n = recvmsg(ctrl.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  std::vector<UniqueFd> fds;
  if (n > 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(fd);  // owned from here: closed on every refusal
      }
    }
  }
  RelayReply reply;
  reply.railsUp = cfg_.railsUp();
  std::optional<core::Tag> proof;  // once the hello is authenticated, every answer carries it
  auto answer = [&](RelayStatus st, const std::string& why) {
    reply.status = st;
    std::array<std::byte, core::kTagBytes + kRelayReplyBytes> out;
    size_t off = 0;
    if (proof) {
      std::memcpy(out.data(), proof->data(), proof->size());
      off = proof->size();
    }
    encodeRelayReply(reply, std::span<std::byte, kRelayReplyBytes>(out.data() + off, kRelayReplyBytes));
    (void)::send(ctrl.get(), out.data(), off + kRelayReplyBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (st != RelayStatus::kOk)
      RECCL_WARN(kLogFailover, "rank %d: relay request refused: %s", cfg_.rank, why.c_str());
  };
  if (n != static_cast<ssize_t>(core::kAuthHelloBytes + kRelayOpenBytes) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    return answer(RelayStatus::kRefused, "malformed request (" + std::to_string(n) + " bytes)");
  auto h = core::openAuthHello(std::span<const std::byte>(buf.data(), core::kAuthHelloBytes), cfg_.key, *nonce);
  Status ok = h.ok() ? core::acceptHello(*h, cfg_.commId, cfg_.nranks, cfg_.rank) : h.status();
  if (!ok.ok()) return answer(RelayStatus::kRefused, ok.message());
  proof = core::proofTag(cfg_.key, h->nonce, *nonce);
  int origin = h->srcRank;
  if (origin < 0 || origin >= cfg_.nranks) return answer(RelayStatus::kRefused, "bad source rank");
  if (cfg_.hostOf[origin] != cfg_.hostOf[cfg_.rank])
    return answer(RelayStatus::kRefused, "rank " + std::to_string(origin) + " is not on this host");
  auto open = decodeRelayOpen(std::span<const std::byte>(buf.data() + core::kAuthHelloBytes, kRelayOpenBytes), origin,
                              cfg_.nranks);
  if (!open.ok()) return answer(RelayStatus::kRefused, open.status().message());
  if (fds.size() != 3) return answer(RelayStatus::kRefused, "expected 3 descriptors, got " + std::to_string(fds.size()));
  if (cfg_.broken()) return answer(RelayStatus::kRefused, "communicator failed");
  int rail = open->rail;
  if (static_cast<size_t>(rail) >= cfg_.nicName.size() ||
      static_cast<size_t>(rail) >= cfg_.peerNic[open->peer].size())
    return answer(RelayStatus::kRefused, "no nic on rail " + std::to_string(rail));
  if (!cfg_.railUp(rail)) return answer(RelayStatus::kRailDown, "rail " + std::to_string(rail) + " is down here");
  auto pipe = RelayPipe::attach(std::move(fds[0]), std::move(fds[1]), std::move(fds[2]));
  if (!pipe.ok()) return answer(RelayStatus::kRefused, pipe.status().message());

  transport::Endpoint dst{cfg_.peerNic[open->peer][rail], cfg_.peerPort[open->peer]};
  const std::string& dev = cfg_.nicName[rail];
  auto tcp = transport::connectTcp(dst, cfg_.nicAddr[rail], dev == "lo" ? "" : dev, Deadline::afterMs(kServeMs));
  if (!tcp.ok()) return answer(RelayStatus::kConnectFailed, tcp.status().message());
  transport::tuneDataSocket(tcp->get(), dev);
  int fl = fcntl(tcp->get(), F_GETFL);
  fcntl(tcp->get(), F_SETFL, fl | O_NONBLOCK);

  auto f = std::make_unique<Forward>();
  f->pipe = std::move(pipe).value();
  f->tcp = std::move(tcp).value();
  f->rail = rail;
  f->origin = origin;
  f->conn = open->conn;
  answer(RelayStatus::kOk, "");
  f->ctrl = std::move(ctrl);
  served_.fetch_add(1);
  RECCL_WARN(kLogFailover, "rank %d: relaying rank %d->%d ch %u for rank %d over rail %d (%s) to rank %d", cfg_.rank,
             f->conn.sender, f->conn.receiver, f->conn.channel, origin, rail, dev.c_str(), open->peer);
  auto* raw = f.get();
  std::lock_guard lk(mu_);
  if (stop_.load()) return;
  forwards_.push_back(std::move(f));
  raw->thread = std::thread([this, raw] { forward(*raw); });
}

void RelayServer::forward(Forward& f) {
  pthread_setname_np(pthread_self(), "reccl-relayfwd");
  auto up = f.pipe.up();
  auto down = f.pipe.down();
  int wakeFd = f.pipe.relayWakeFd();
  bool broke = false;
  uint64_t moved = 0;
  auto brk = [&](RelayBreak why) {
    if (broke) return;
    broke = true;
    f.pipe.shared()->broken.store(static_cast<uint32_t>(why), std::memory_order_release);
    f.pipe.wakeOrigin();
    // The origin migrates the connection elsewhere, and the peer retires this socket when that
    // migration commits. Until then the socket stays open, unused: the peer has been receiving
    // on it, so a close now (one crosses a gray rail) would read there as the origin's end, not
    // as a move (Monitor::onPathFailure). It closes when the origin closes its control socket.
    if (why == RelayBreak::kPeerClosed) f.tcp.reset();
  };
  while (!stop_.load()) {
    RelayPipe::drainWake(wakeFd);
    if (f.breakReq.load()) brk(RelayBreak::kLink);
    bool progress = false;
    short ev = 0;
    if (!broke) {
      auto r = up.readable();
      if (!r.empty()) {
        ssize_t n = ::send(f.tcp.get(), r.data(), r.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          up.consumed(static_cast<size_t>(n));
          moved += static_cast<uint64_t>(n);
          progress = true;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          ev |= POLLOUT;
        } else {
          brk(errno == ECONNRESET || errno == EPIPE ? RelayBreak::kPeerClosed : RelayBreak::kLink);
        }
      }
    }
    if (!broke) {
      auto w = down.writable();
      if (!w.empty()) {
        ssize_t n = ::recv(f.tcp.get(), w.data(), w.size(), MSG_DONTWAIT);
        if (n > 0) {
          down.produced(static_cast<size_t>(n));
          moved += static_cast<uint64_t>(n);
          progress = true;
        } else if (n == 0) {
          brk(RelayBreak::kPeerClosed);
        } else if (errno == EAGAIN || errno == EINTR) {
          ev |= POLLIN;
        } else {
          brk(errno == ECONNRESET ? RelayBreak::kPeerClosed : RelayBreak::kLink);
        }
      }
    }
    if (progress) {
      f.pipe.wakeOrigin();
      bytes_.fetch_add(moved, std::memory_order_relaxed);
      moved = 0;
      continue;
    }
    pollfd pf[3] = {{wakeFd, POLLIN, 0}, {f.ctrl.get(), POLLIN, 0}, {broke ? -1 : f.tcp.get(), ev, 0}};
    int rc = ::poll(pf, 3, 100);
    if (rc > 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) break;  // the origin closed its end
  }
  if (stop_.load()) brk(RelayBreak::kLink);
  RECCL_INFO(kLogFailover, "rank %d: relay of rank %d->%d ch %u for rank %d ended", cfg_.rank, f.conn.sender,
             f.conn.receiver, f.conn.channel, f.origin);
  f.tcp.reset();
  f.ctrl.reset();
  f.done.store(true);
}

void RelayServer::breakRail(int rail) {
  std::lock_guard lk(mu_);
  for (auto& f : forwards_) {
    if (f->rail != rail || f->done.load()) continue;
    f->breakReq.store(true);
    f->pipe.wakeRelay();
  }
}

void RelayServer::reap(bool all) {
  std::list<std::unique_ptr<Forward>> gone;
  {
    std::lock_guard lk(mu_);
    for (auto it = forwards_.begin(); it != forwards_.end();) {
      if (all || (*it)->done.load()) {
        gone.push_back(std::move(*it));
        it = forwards_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& f : gone)
    if (f->thread.joinable()) f->thread.join();
}

void RelayServer::stop(int64_t drainMs) {
  if (acceptor_.joinable()) {
    // Pipes still open: their origins may still be sending their last steps through here.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(drainMs);
    for (;;) {
      bool open = false;
      {
        std::lock_guard lk(mu_);
        for (auto& f : forwards_) open |= !f->done.load();
      }
      if (!open || cfg_.broken() || std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop_.store(true);
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stopEvent_.get(), &one, sizeof(one));
    acceptor_.join();
  }
  stop_.store(true);
  {
    std::lock_guard lk(mu_);
    for (auto& f : forwards_) f->pipe.wakeRelay();
  }
  reap(true);
}

}  // namespace reccl::failover
