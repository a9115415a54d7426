#include "core/bootstrap.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <thread>

#include "reccl/common/log.h"

namespace reccl::core {
namespace {

std::atomic<uint64_t> gRefused{0};
constexpr auto kHelloGrace = std::chrono::seconds(5);

struct Pending {
  UniqueFd fd;
  std::vector<std::byte> buf;
  Deadline helloBy = Deadline::never();
  bool helloDone = false;
  int rank = -1;
  int nranks = 0;
};

std::string peerName(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return transport::Endpoint{sa.sin_addr.s_addr, ntohs(sa.sin_port)}.str();
}

void refuse(Pending& p, const std::string& why) {
  gRefused.fetch_add(1);
  RECCL_WARN(kLogBootstrap, "bootstrap refused connection from %s: %s", peerName(p.fd.get()).c_str(), why.c_str());
  p.fd.reset();
}

}  // namespace

uint64_t BootstrapRoot::refusedTotal() { return gRefused.load(); }

Result<std::shared_ptr<BootstrapRoot>> BootstrapRoot::start(uint32_t addr, uint16_t port, uint64_t secret,
                                                            uint64_t commId, Deadline deadline,
                                                            transport::Endpoint* bound) {
  auto root = std::make_shared<BootstrapRoot>();
  RECCL_ASSIGN_OR_RETURN(root->listen_, transport::listenTcp(addr, port, bound));
  root->secret_ = secret;
  root->commId_ = commId;
  root->deadline_ = deadline;
  std::thread([root] { root->run(0); }).detach();
  return root;
}

void BootstrapRoot::run(int) {
  std::vector<Pending> clients;
  std::vector<std::vector<std::byte>> infos;
  std::vector<int> owner;  // rank -> index in clients
  int nranks = 0;
  int have = 0;
  while (!deadline_.expired()) {
    std::vector<pollfd> pfds;
    pfds.push_back({listen_.get(), POLLIN, 0});
    for (auto& c : clients) pfds.push_back({c.fd.get(), static_cast<short>(c.fd ? POLLIN : 0), 0});
    int ms = deadline_.remainingMsForPoll();
    int rc = poll(pfds.data(), pfds.size(), ms < 0 || ms > 100 ? 100 : ms);
    if (rc < 0 && errno != EINTR) {
      RECCL_WARN(kLogBootstrap, "bootstrap root poll: %s", strerror(errno));
      return;
    }
    if (pfds[0].revents & POLLIN) {
      UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (fd) {
        Pending p;
        p.fd = std::move(fd);
        p.helloBy = Deadline::after(kHelloGrace);
        clients.push_back(std::move(p));
      }
    }
    for (size_t i = 0; i < clients.size(); ++i) {
      Pending& c = clients[i];
      if (!c.fd) continue;
      if (!c.helloDone && c.helloBy.expired()) {
        refuse(c, "no hello in time");
        continue;
      }
      if (i + 1 >= pfds.size() || !(pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      std::byte tmp[4096];
      ssize_t n = recv(c.fd.get(), tmp, sizeof(tmp), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (c.rank >= 0) {
          RECCL_WARN(kLogBootstrap, "bootstrap: rank %d disconnected before the exchange", c.rank);
          if (!infos[c.rank].empty()) --have;
          infos[c.rank].clear();
          owner[c.rank] = -1;
          c.fd.reset();
        } else {
          refuse(c, "closed before hello");
        }
        continue;
      }
      if (n < 0) continue;
      c.buf.insert(c.buf.end(), tmp, tmp + n);
      if (!c.helloDone && c.buf.size() >= kHelloBytes) {
        auto h = decodeHello(c.buf);
        if (!h.ok()) {
          refuse(c, h.status().message());
          continue;
        }
        Status s = h->kind == HelloKind::kBootstrap ? acceptHello(*h, secret_, commId_, h->nranks, -1)
                                                     : Status(Errc::kProtocol, "not a bootstrap hello");
        if (s.ok() && nranks != 0 && h->nranks != nranks) s = Status(Errc::kProtocol, "nranks differs from other ranks");
        if (s.ok() && nranks != 0 && owner[h->srcRank] >= 0) s = Status(Errc::kProtocol, "rank already joined");
        if (!s.ok()) {
          refuse(c, s.message());
          continue;
        }
        if (nranks == 0) {
          nranks = h->nranks;
          infos.assign(nranks, {});
          owner.assign(nranks, -1);
        }
        c.helloDone = true;
        c.rank = h->srcRank;
        c.nranks = h->nranks;
        owner[c.rank] = static_cast<int>(i);
        c.buf.erase(c.buf.begin(), c.buf.begin() + kHelloBytes);
      }
      if (c.helloDone && infos[c.rank].empty() && c.buf.size() >= 4) {
        uint32_t len;
        std::memcpy(&len, c.buf.data(), 4);
        if (len == 0 || len > kMaxRankInfoBytes) {
          owner[c.rank] = -1;
          refuse(c, "bad rank info length");
          continue;
        }
        if (c.buf.size() >= 4 + len) {
          auto info = decodeRankInfo(std::span<const std::byte>(c.buf.data() + 4, len));
          if (!info.ok() || info->rank != c.rank) {
            owner[c.rank] = -1;
            refuse(c, info.ok() ? "rank info names another rank" : info.status().message());
            continue;
          }
          infos[c.rank].assign(c.buf.begin() + 4, c.buf.begin() + 4 + len);
          ++have;
        }
      }
    }
    if (nranks > 0 && have == nranks) {
      std::vector<RankInfo> table;
      for (int r = 0; r < nranks; ++r) table.push_back(decodeRankInfo(infos[r]).value());
      auto blob = encodeRankTable(table);
      uint32_t len = static_cast<uint32_t>(blob.size());
      for (int r = 0; r < nranks; ++r) {
        int fd = clients[owner[r]].fd.get();
        Status s = transport::sendAll(fd, std::as_bytes(std::span(&len, 1)), deadline_);
        if (s.ok()) s = transport::sendAll(fd, blob, deadline_);
        if (!s.ok()) RECCL_WARN(kLogBootstrap, "bootstrap: sending the table to rank %d: %s", r, s.message().c_str());
      }
      return;
    }
  }
  RECCL_WARN(kLogBootstrap, "bootstrap root: deadline passed with %d of %d ranks", have, nranks);
}

Result<std::vector<RankInfo>> bootstrapExchange(const transport::Endpoint& root, const Hello& hello,
                                                const std::function<Result<RankInfo>(uint32_t)>& makeInfo,
                                                Deadline deadline) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, transport::connectTcp(root, 0, "", deadline));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  std::array<std::byte, kHelloBytes> hb;
  encodeHello(hello, hb);
  RECCL_TRY(transport::sendAll(fd.get(), hb, deadline).Wrap("bootstrap hello"));
  RECCL_ASSIGN_OR_RETURN(RankInfo info, makeInfo(local.sin_addr.s_addr));
  auto blob = encodeRankInfo(info);
  uint32_t blen = static_cast<uint32_t>(blob.size());
  RECCL_TRY(transport::sendAll(fd.get(), std::as_bytes(std::span(&blen, 1)), deadline).Wrap("bootstrap"));
  RECCL_TRY(transport::sendAll(fd.get(), blob, deadline).Wrap("bootstrap"));
  uint32_t tlen = 0;
  Status s = transport::recvAll(fd.get(), std::as_writable_bytes(std::span(&tlen, 1)), deadline);
  if (!s.ok()) {
    if (s.code() == Errc::kTimeout)
      return Status(Errc::kTimeout, "bootstrap: not every rank joined before RECCL_BOOTSTRAP_TIMEOUT_MS");
    return s.Wrap("bootstrap: waiting for the rank table");
  }
  if (tlen > kMaxRankInfoBytes * static_cast<size_t>(hello.nranks) + 8)
    return Status(Errc::kProtocol, "bootstrap: rank table too large");
  std::vector<std::byte> table(tlen);
  RECCL_TRY(transport::recvAll(fd.get(), table, deadline).Wrap("bootstrap: rank table"));
  return decodeRankTable(table, hello.nranks);
}

}  // namespace reccl::core
