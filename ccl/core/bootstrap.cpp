#include "core/bootstrap.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cinttypes>
#include <cstring>

#include "channel/wire_bytes.h"
#include "core/handshake.h"
#include "reccl/common/log.h"

namespace reccl::core {
namespace {

using channel::get;
using channel::put;

std::atomic<uint64_t> gRefused{0};
constexpr size_t kMaxHelloAndInfo = kAuthHelloBytes + 4 + kMaxRankInfoBytes;

std::string peerName(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return transport::Endpoint{sa.sin_addr.s_addr, ntohs(sa.sin_port)}.str();
}

std::string hex64(uint64_t v) {
  char b[24];
  snprintf(b, sizeof(b), "%016" PRIx64, v);
  return b;
}

uint64_t randomNonzeroU64() {
  uint64_t v = 0;
  while (v == 0) {
    Key k = randomKey();
    std::memcpy(&v, k.data(), sizeof(v));
  }
  return v;
}

}  // namespace

struct BootstrapRoot::Client {
  UniqueFd fd;
  Nonce serverNonce{};
  Nonce clientNonce{};
  std::vector<std::byte> buf;
  Deadline helloBy = Deadline::never();
  bool helloDone = false;
  int rank = -1;
  std::vector<std::byte> info;  // its RankInfo record, once read
};

uint64_t BootstrapRoot::refusedTotal() { return gRefused.load(); }

Result<std::shared_ptr<BootstrapRoot>> BootstrapRoot::start(const BootstrapConfig& cfg, transport::Endpoint* bound) {
  RECCL_TRY(initCrypto());
  std::shared_ptr<BootstrapRoot> root(new BootstrapRoot());
  root->cfg_ = cfg;
  auto l = transport::listenTcp(cfg.addr, cfg.port, bound);
  if (!l.ok()) {
    if (l.status().message().find(strerror(EADDRINUSE)) != std::string::npos)
      return Status(Errc::kInvalidUsage,
                    "the rendezvous address " + transport::Endpoint{cfg.addr, cfg.port}.str() +
                        " is in use: another job (or another communicator of this one) has its root there; "
                        "give each a port of its own (MASTER_PORT, RECCL_COMM_ID) or use recclGetUniqueId");
    return l.status();
  }
  root->listen_ = std::move(l).value();
  root->stopEvent_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!root->stopEvent_) return Status::FromErrno(errno, "eventfd");
  // The thread keeps the root alive while it runs, so a root nobody holds (recclGetUniqueId's)
  // serves until its table went out or its deadline passed.
  root->thread_ = std::thread([root] { root->run(); });
  if (!cfg.lingerUntilStopped) root->thread_.detach();
  return root;
}

BootstrapRoot::~BootstrapRoot() {
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();  // the last reference was the thread's own
    else
      stop();
  }
}

void BootstrapRoot::onLateClaim(std::function<void(const Status&)> fn) {
  std::lock_guard lk(lateMu_);
  late_ = std::move(fn);
  if (late_ && !lateClaim_.ok()) late_(lateClaim_);
}

void BootstrapRoot::stop() {
  onLateClaim(nullptr);
  uint64_t one = 1;
  if (stopEvent_) (void)!write(stopEvent_.get(), &one, sizeof(one));
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void BootstrapRoot::refuse(Client& c, const std::string& why) {
  gRefused.fetch_add(1);
  RECCL_WARN(kLogBootstrap, "bootstrap refused connection from %s: %s", peerName(c.fd.get()).c_str(), why.c_str());
  // The reason goes to the peer (best effort: a new socket's buffer takes it whole).
  std::string text = why.substr(0, kMaxRefusalBytes);
  std::vector<std::byte> out(kRootFrameHeaderBytes + text.size());
  encodeRootFrameHeader(RootFrameHeader{RootFrame::kRefused, static_cast<uint32_t>(text.size())},
                        std::span<std::byte, kRootFrameHeaderBytes>(out.data(), kRootFrameHeaderBytes));
  std::memcpy(out.data() + kRootFrameHeaderBytes, text.data(), text.size());
  (void)!::send(c.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (c.rank >= 0 && c.rank < static_cast<int>(owner_.size()) && owner_[c.rank] == &c) {
    owner_[c.rank] = nullptr;
    if (!c.info.empty()) --have_;
  }
  c.fd.reset();
}

void BootstrapRoot::failAll(const std::string& why) {
  RECCL_WARN(kLogBootstrap, "bootstrap failed: %s", why.c_str());
  failed_ = true;
  for (auto& c : clients_)
    if (c->fd) refuse(*c, why);
}

void BootstrapRoot::onAccept() {
  UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) return;
  auto nonce = sendChallenge(fd.get(), AuthPurpose::kBootstrap);
  if (!nonce.ok()) return;
  auto c = std::make_unique<Client>();
  c->fd = std::move(fd);
  c->serverNonce = *nonce;
  c->helloBy = Deadline::after(kHelloGrace);
  clients_.push_back(std::move(c));
}

void BootstrapRoot::onHello(Client& c, const Hello& h) {
  if (h.kind != HelloKind::kBootstrap || h.dstRank != -1) return refuse(c, "not a bootstrap hello");
  if (h.jobId != cfg_.jobId)
    return refuse(c, "this root serves another job (job id " + hex64(cfg_.jobId) + ", the rank's " + hex64(h.jobId) +
                         "): another job uses this rendezvous address, or the ranks disagree on the launcher's job "
                         "variables or RECCL_JOB_SECRET");
  if (tableSent_) {
    // A rank of this very job after the communicator formed: the address is shared with another
    // job, whose ranks may have joined this communicator in place of ours.
    Status s(Errc::kInvalidUsage, "rank " + std::to_string(h.srcRank) + " of a job with this rendezvous address (" +
                                      transport::Endpoint{cfg_.addr, cfg_.port}.str() +
                                      ") and world size tried to join after the communicator formed: two jobs share "
                                      "the address, so ranks of both may be in this communicator");
    refuse(c, s.message());
    std::lock_guard lk(lateMu_);
    if (lateClaim_.ok()) lateClaim_ = s;
    if (late_) late_(s);
    return;
  }
  if (nranks_ != 0 && h.nranks != nranks_)
    return refuse(c, "world size " + std::to_string(h.nranks) + " differs from the other ranks' " +
                         std::to_string(nranks_));
  if (nranks_ == 0) {
    nranks_ = h.nranks;
    owner_.assign(nranks_, nullptr);
  }
  if (owner_[h.srcRank]) {
    // Two processes claim one rank with this job's id and key: two jobs share the address.
    // Neither may go on with the other's ranks.
    c.rank = h.srcRank;
    return failAll("rank " + std::to_string(h.srcRank) +
                   " was claimed twice: two jobs share this rendezvous address and world size (give each its own "
                   "MASTER_PORT or RECCL_COMM_ID, or a RECCL_JOB_SECRET)");
  }
  c.helloDone = true;
  c.rank = h.srcRank;
  c.clientNonce = h.nonce;
  owner_[c.rank] = &c;
}

void BootstrapRoot::onReadable(Client& c) {
  std::byte tmp[4096];
  ssize_t n = recv(c.fd.get(), tmp, sizeof(tmp), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    if (c.helloDone) RECCL_WARN(kLogBootstrap, "bootstrap: rank %d disconnected before the exchange", c.rank);
    refuse(c, c.helloDone ? "disconnected" : "closed before hello");
    return;
  }
  if (n < 0) return;
  if (c.buf.size() + n > kMaxHelloAndInfo) return refuse(c, "sent more than a hello and a rank record");
  c.buf.insert(c.buf.end(), tmp, tmp + n);
  if (!c.helloDone) {
    if (c.buf.size() < kAuthHelloBytes) return;
    auto bytes = std::span<const std::byte>(c.buf.data(), kAuthHelloBytes);
    auto h = decodeHello(bytes.first(kHelloBytes));
    if (!h.ok()) return refuse(c, h.status().message());
    if (h->jobId == cfg_.jobId && !verifyHelloTag(cfg_.bootKey, c.serverNonce, bytes.first(kHelloBytes),
                                                  bytes.subspan(kHelloBytes)))
      return refuse(c, isZeroKey(cfg_.bootKey) ? "the rank has a job secret and this root has none"
                                               : "the job secret differs from the root's (RECCL_JOB_SECRET, "
                                                 "RECCL_JOB_SECRET_FILE or the unique id)");
    onHello(c, *h);
    if (!c.fd || failed_) return;
    c.buf.erase(c.buf.begin(), c.buf.begin() + kAuthHelloBytes);
  }
  if (c.info.empty() && c.buf.size() >= 4) {
    uint32_t len = get<uint32_t>(c.buf.data(), 0);
    if (len == 0 || len > kMaxRankInfoBytes) return refuse(c, "bad rank info length");
    if (c.buf.size() < 4 + len) return;
    auto info = decodeRankInfo(std::span<const std::byte>(c.buf.data() + 4, len));
    if (!info.ok() || info->rank != c.rank)
      return refuse(c, info.ok() ? "rank info names another rank" : info.status().message());
    c.info.assign(c.buf.begin() + 4, c.buf.begin() + 4 + len);
    ++have_;
  }
}

void BootstrapRoot::sendTables() {
  std::vector<RankInfo> table;
  for (int r = 0; r < nranks_; ++r) table.push_back(decodeRankInfo(owner_[r]->info).value());
  auto blob = encodeRankTable(table);
  CommSecret secret{randomKey(), randomNonzeroU64()};
  for (int r = 0; r < nranks_; ++r) {
    Client& c = *owner_[r];
    std::vector<std::byte> frame(kRootFrameHeaderBytes + 4 + blob.size() + kSealedCommSecretBytes + kTagBytes);
    auto body = std::span<std::byte>(frame).subspan(kRootFrameHeaderBytes, 4 + blob.size() + kSealedCommSecretBytes);
    put<uint32_t>(body.data(), 0, static_cast<uint32_t>(blob.size()));
    std::memcpy(body.data() + 4, blob.data(), blob.size());
    sealCommSecret(secret, cfg_.bootKey, c.clientNonce, c.serverNonce,
                   std::span<std::byte, kSealedCommSecretBytes>(body.data() + 4 + blob.size(), kSealedCommSecretBytes));
    Tag t = tableTag(cfg_.bootKey, c.clientNonce, c.serverNonce, body);
    std::memcpy(body.data() + body.size(), t.data(), t.size());
    encodeRootFrameHeader(RootFrameHeader{RootFrame::kTable, static_cast<uint32_t>(body.size() + kTagBytes)},
                          std::span<std::byte, kRootFrameHeaderBytes>(frame.data(), kRootFrameHeaderBytes));
    // At least the grace from now: the table may go out after the root's deadline (a rank that
    // joined late, within its own), and a table larger than a socket buffer needs its time.
    const Deadline sendBy = cfg_.deadline.at() - Clock::now() >= std::chrono::milliseconds(kRootGraceMs)
                                ? cfg_.deadline
                                : Deadline::afterMs(kRootGraceMs);
    Status s = transport::sendAll(c.fd.get(), frame, sendBy);
    if (!s.ok()) RECCL_WARN(kLogBootstrap, "bootstrap: sending the table to rank %d: %s", r, s.message().c_str());
  }
  wipeKey(secret.key);
  tableSent_ = true;
  for (int r = 0; r < nranks_; ++r) owner_[r]->fd.reset();  // every rank has its table
  owner_.clear();
}

void BootstrapRoot::run() {
  pthread_setname_np(pthread_self(), "reccl-bootroot");
  for (;;) {
    if (failed_) return;
    if (tableSent_ && !cfg_.lingerUntilStopped) return;
    if (!tableSent_ && cfg_.deadline.expired() &&
        (have_ == 0 || Clock::now() - cfg_.deadline.at() >=
                           std::chrono::milliseconds(kRootWaitPastDeadlineMs))) {
      failAll("not every rank joined before the deadline (" + std::to_string(have_) + " of " +
              std::to_string(nranks_) + ")");
      return;
    }
    std::vector<pollfd> pfds;
    pfds.push_back({stopEvent_.get(), POLLIN, 0});
    pfds.push_back({listen_.get(), POLLIN, 0});
    for (auto& c : clients_) pfds.push_back({c->fd.get(), POLLIN, 0});
    int rc = poll(pfds.data(), pfds.size(), 100);
    if (rc < 0 && errno != EINTR) {
      RECCL_WARN(kLogBootstrap, "bootstrap root poll: %s", strerror(errno));
      return;
    }
    if (pfds[0].revents & POLLIN) return;
    size_t polled = clients_.size();
    if (pfds[1].revents & POLLIN) onAccept();
    for (size_t i = 0; i < polled && !failed_; ++i) {
      Client& c = *clients_[i];
      if (!c.fd) continue;
      if (!c.helloDone && c.helloBy.expired()) {
        refuse(c, "no hello in time");
        continue;
      }
      if (pfds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) onReadable(c);
    }
    std::erase_if(clients_, [](const std::unique_ptr<Client>& c) { return !c->fd; });
    if (!failed_ && !tableSent_ && nranks_ > 0 && have_ == nranks_) sendTables();
  }
}

Result<BootstrapResult> bootstrapExchange(const transport::Endpoint& root, const UniqueIdData& id, int rank,
                                          int nranks, const std::function<Result<RankInfo>(uint32_t)>& makeInfo,
                                          Deadline deadline) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, transport::connectTcp(root, 0, "", deadline));
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  RECCL_ASSIGN_OR_RETURN(RankInfo info, makeInfo(local.sin_addr.s_addr));
  auto blob = encodeRankInfo(info);
  std::vector<std::byte> then(4 + blob.size());
  put<uint32_t>(then.data(), 0, static_cast<uint32_t>(blob.size()));
  std::memcpy(then.data() + 4, blob.data(), blob.size());

  Hello hello;
  hello.kind = HelloKind::kBootstrap;
  hello.jobId = id.jobId;
  hello.srcRank = rank;
  hello.dstRank = -1;
  hello.nranks = nranks;
  ByteIo io = socketIo(fd.get(), deadline);
  const std::string where = "bootstrap root " + root.str();
  auto session = sendAuthHello(io, hello, id.bootKey, AuthPurpose::kBootstrap, then);
  if (!session.ok()) return session.status().Wrap(where);

  std::array<std::byte, kRootFrameHeaderBytes> hb;
  Status s = io.recv(hb);
  if (!s.ok()) {
    if (s.code() == Errc::kTimeout)
      return Status(Errc::kTimeout, "bootstrap: not every rank joined before RECCL_BOOTSTRAP_TIMEOUT_MS");
    return s.Wrap(where + ": waiting for the rank table");
  }
  RECCL_ASSIGN_OR_RETURN(RootFrameHeader h,
                         decodeRootFrameHeader(hb, kMaxRankInfoBytes * static_cast<size_t>(nranks) + 4096));
  std::vector<std::byte> body(h.length);
  RECCL_TRY(io.recv(body).Wrap(where + ": rank table"));
  if (h.type == RootFrame::kRefused)
    return Status(Errc::kInvalidUsage, where + " refused rank " + std::to_string(rank) + ": " +
                                           std::string(reinterpret_cast<const char*>(body.data()), body.size()));
  auto signedPart = std::span<const std::byte>(body).first(body.size() - kTagBytes);
  if (!verifyTableTag(id.bootKey, session->client, session->server, signedPart,
                      std::span<const std::byte>(body).last(kTagBytes)))
    return Status(Errc::kPermission, where + ": the root does not hold this job's secret");
  uint32_t tlen = get<uint32_t>(body.data(), 0);
  if (tlen != signedPart.size() - 4 - kSealedCommSecretBytes) return Status(Errc::kProtocol, where + ": bad table frame");
  BootstrapResult out;
  RECCL_ASSIGN_OR_RETURN(out.table, decodeRankTable(signedPart.subspan(4, tlen), nranks));
  RECCL_ASSIGN_OR_RETURN(out.comm,
                         openCommSecret(signedPart.subspan(4 + tlen), id.bootKey, session->client, session->server));
  return out;
}

}  // namespace reccl::core
