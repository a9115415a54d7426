#include "core/bootstrap.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstring>

#include "channel/wire_bytes.h"
#include "core/bootstrap_table.h"
#include "core/handshake.h"
#include "reccl/common/log.h"

namespace reccl::core {
namespace {

using channel::get;
using channel::put;

std::atomic<uint64_t> gRefused{0};
// The roots this process started, for inThisProcess().
std::mutex gRootsMu;
std::vector<std::weak_ptr<BootstrapRoot>> gRoots;
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

std::string rootName(int nroots, int index) {
  return nroots == 0 ? "the only root" : "root " + std::to_string(index) + " of " + std::to_string(nroots);
}

// "1, 4-7, 9": ascending ranks as ranges, the first `most` of them (then "and N more").
std::string rankRanges(const std::vector<int>& ranks, size_t most) {
  std::string out;
  size_t shown = 0, i = 0;
  for (; i < ranks.size() && shown < most; ++shown) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  if (i < ranks.size()) out += " and " + std::to_string(ranks.size() - i) + " more";
  return out;
}

// The largest table frame `nranks` ranks make (what a root frame's header may announce).
}  // namespace

struct BootstrapRoot::Client {
  UniqueFd fd;
  Nonce serverNonce{};
  Nonce clientNonce{};
  std::vector<std::byte> buf;
  Deadline helloBy = Deadline::never();
  bool helloDone = false;
  int rank = -1;  // its hello's source rank: the first of the ranks it brings
  int count = 0;  // how many ranks' records it brings: 1, or a block's at root 0 from its leader
  std::vector<RankInfo> infos;         // ranks rank .. rank + count - 1, once read
  bool awaitingFull = false;           // a block's leader at its block's root: its block went out
};

uint64_t BootstrapRoot::refusedTotal() { return gRefused.load(); }

Result<std::shared_ptr<BootstrapRoot>> BootstrapRoot::start(const BootstrapConfig& cfg, transport::Endpoint* bound) {
  RECCL_TRY(initCrypto());
  std::shared_ptr<BootstrapRoot> root(new BootstrapRoot());
  root->cfg_ = cfg;
  transport::Endpoint ep;
  auto l = transport::listenTcp(cfg.addr, cfg.port, &ep);
  if (!l.ok()) {
    if (l.status().message().find(strerror(EADDRINUSE)) != std::string::npos)
      return Status(Errc::kInvalidUsage,
                    "the rendezvous address " + transport::Endpoint{cfg.addr, cfg.port}.str() +
                        " is in use: another job (or another communicator of this one) has its root there; "
                        "give each a port of its own (MASTER_PORT, RECCL_COMM_ID) or use recclGetUniqueId");
    return l.status();
  }
  root->listen_ = std::move(l).value();
  root->cfg_.port = ep.port;  // the one it listens on, where the config let the kernel pick
  if (bound) *bound = ep;
  {
    std::lock_guard lk(gRootsMu);
    std::erase_if(gRoots, [](const std::weak_ptr<BootstrapRoot>& w) { return w.expired(); });
    gRoots.push_back(root);
  }
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

void BootstrapRoot::sendFrame(Client& c, RootFrame type, std::span<const std::byte> payload, Deadline by) {
  const std::vector<std::byte> out = rootFrame(type, payload);
  if (type == RootFrame::kRefused) {
    (void)!::send(c.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);  // best effort
    return;
  }
  Status s = transport::sendAll(c.fd.get(), out, by);
  if (!s.ok()) RECCL_WARN(kLogBootstrap, "bootstrap: sending to rank %d: %s", c.rank, s.message().c_str());
}

void BootstrapRoot::refuse(Client& c, const std::string& why) {
  gRefused.fetch_add(1);
  RECCL_WARN(kLogBootstrap, "bootstrap refused connection from %s: %s", peerName(c.fd.get()).c_str(), why.c_str());
  // The reason goes to the peer (best effort: a new socket's buffer takes it whole).
  std::string text = why.substr(0, kMaxRefusalBytes);
  sendFrame(c, RootFrame::kRefused, std::as_bytes(std::span(text.data(), text.size())), Deadline::never());
  for (int r = c.rank; r >= 0 && r < c.rank + c.count && r < static_cast<int>(owner_.size()); ++r)
    if (owner_[r] == &c) {
      owner_[r] = nullptr;
      if (!c.infos.empty()) --have_;
    }
  const bool hadRecords = !c.infos.empty() && !tableSent_;
  c.fd.reset();
  if (failed_) return;
  if (c.awaitingFull)
    failAll("the leader of this root's block (rank " + std::to_string(c.rank) +
            ") left before it brought back the table of every rank (" + why + ")");
  else if (blockSent_ && hadRecords)
    // Its record is on its way to root 0 in the block: it cannot be replaced now.
    failAll("rank " + std::to_string(c.rank) + " left after this root's block went to its leader (" + why + ")");
}

void BootstrapRoot::failAll(const std::string& why) {
  RECCL_WARN(kLogBootstrap, "bootstrap failed: %s", why.c_str());
  failed_ = true;
  failure_ = why;
  for (auto& c : clients_)
    if (c->fd) refuse(*c, why);
}

std::string BootstrapRoot::missingText() const {
  if (nranks_ == 0 || tableSent_ || failed_ || owner_.empty()) return "";
  // Ranks that never brought their records are the ones to look for; ranks that brought them and
  // left (their own deadline passed first) only say the wait was long. Root 0 of several takes
  // each other block from its leader: a block that never came is named by its leader.
  const RankBlock own = nroots_ > 0 ? rankBlock(nranks_, nroots_, index_) : RankBlock{0, nranks_};
  std::vector<int> never, left, leaders;
  std::string blocks;
  for (int r = own.first; r < own.end; ++r)
    if (!came_[r])
      never.push_back(r);
    else if (!owner_[r] || owner_[r]->infos.empty())
      left.push_back(r);
  for (int k = 1; index_ == 0 && k < nroots_; ++k) {
    const RankBlock b = rankBlock(nranks_, nroots_, k);
    if (came_[b.first]) continue;
    leaders.push_back(b.first);
    blocks += (blocks.empty() ? "" : ", ") + std::to_string(b.first) + "-" + std::to_string(b.end - 1);
  }
  auto named = [](const std::vector<int>& r) {
    return "rank" + std::string(r.size() > 1 ? "s " : " ") + rankRanges(r, 16);
  };
  std::string out;
  if (!never.empty()) out = "never reached by " + named(never);
  if (!leaders.empty())
    out += (out.empty() ? "never reached by the leader" : ", nor by the leader") +
           std::string(leaders.size() > 1 ? "s (" : " (") + named(leaders) + ") bringing ranks " + blocks;
  if (out.empty() && !left.empty()) out = "every rank reached it; left before the table went out: " + named(left);
  return out;
}

std::shared_ptr<BootstrapRoot> BootstrapRoot::inThisProcess(uint64_t jobId, uint16_t port) {
  std::lock_guard lk(gRootsMu);
  for (auto& w : gRoots)
    if (auto r = w.lock(); r && r->cfg_.jobId == jobId && r->cfg_.port == port) return r;
  return nullptr;
}

std::string BootstrapRoot::whoIsMissing() const {
  // Turns of try_lock for up to 100 ms rather than a timed mutex, whose lock ThreadSanitizer does
  // not see (the reads under it would look unguarded).
  std::unique_lock lk(stateMu_, std::defer_lock);
  for (int turn = 0; !lk.try_lock(); ++turn) {
    if (turn == 100) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string missing = missingText();
  if (missing.empty()) return "";
  return "gathering " + std::to_string(expected()) + " ranks, " + missing;
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

int BootstrapRoot::expected() const {
  // A block's root gathers its block; root 0 (and a single root) every rank, the other blocks'
  // through their leaders.
  return nroots_ > 0 && index_ > 0 ? rankBlock(nranks_, nroots_, index_).size() : nranks_;
}

void BootstrapRoot::onHello(Client& c, const Hello& h) {
  if (failed_) return refuse(c, failure_);
  const bool block = h.kind == HelloKind::kBootstrapBlock;
  if (!isBootstrapHello(h.kind) || h.dstRank != -1) return refuse(c, "not a bootstrap hello");
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
  const int nroots = block ? static_cast<int>(h.channel) : 0;
  const int index = block ? static_cast<int>(h.epoch) : 0;
  if (block && (nroots < 1 || nroots > std::min(h.nranks, kMaxRoots) || index >= nroots))
    return refuse(c, "root " + std::to_string(index) + " of " + std::to_string(nroots) + ": not a root of " +
                         std::to_string(h.nranks) + " ranks (1 to min(ranks, " + std::to_string(kMaxRoots) + ") roots)");
  if (nranks_ != 0 && (nroots != nroots_ || index != index_))
    return refuse(c, "rank " + std::to_string(h.srcRank) + " takes this root for " + rootName(nroots, index) +
                         ", the ranks before it for " + rootName(nroots_, index_) +
                         ": the ranks passed different unique ids, or in different orders");
  // Which ranks it brings: its own; at root 0, a block's leader brings its block.
  int count = 1;
  if (block) {
    const int k = blockOfRank(h.nranks, nroots, h.srcRank);
    const RankBlock b = rankBlock(h.nranks, nroots, k);
    if (index == 0 && k > 0) {
      if (h.srcRank != b.first)
        return refuse(c, "rank " + std::to_string(h.srcRank) + " belongs to root " + std::to_string(k) +
                             "'s block; root 0 takes only that block's leader, rank " + std::to_string(b.first));
      count = b.size();
    } else if (k != index) {
      return refuse(c, "rank " + std::to_string(h.srcRank) + " belongs to root " + std::to_string(k) + " of " +
                           std::to_string(nroots) + ", not to this one (root " + std::to_string(index) +
                           "): the ranks passed their unique ids in different orders");
    }
  }
  if (blockSent_) return refuse(c, "rank " + std::to_string(h.srcRank) + " came after this root's block went to its leader");
  if (nranks_ == 0) {
    nranks_ = h.nranks;
    nroots_ = nroots;
    index_ = index;
    owner_.assign(nranks_, nullptr);
    came_.assign(nranks_, false);
  }
  for (int r = h.srcRank; r < h.srcRank + count; ++r)
    if (owner_[r]) {
      // Two processes claim one rank with this job's id and key: two jobs share the address.
      // Neither may go on with the other's ranks.
      c.rank = h.srcRank;
      return failAll("rank " + std::to_string(r) +
                     " was claimed twice: two jobs share this rendezvous address and world size (give each its own "
                     "MASTER_PORT or RECCL_COMM_ID, or a RECCL_JOB_SECRET)");
    }
  c.helloDone = true;
  c.rank = h.srcRank;
  c.count = count;
  c.clientNonce = h.nonce;
  for (int r = h.srcRank; r < h.srcRank + count; ++r) owner_[r] = &c;
}

size_t BootstrapRoot::recordsMost(const Client& c) const {
  // One record; with several roots a block of c.count in the table's layout.
  return nroots_ > 0 ? 8 + static_cast<size_t>(c.count) * (4 + kMaxRankInfoBytes) : kMaxRankInfoBytes;
}

void BootstrapRoot::onRecords(Client& c) {
  if (c.buf.size() < 4) return;
  const uint32_t len = get<uint32_t>(c.buf.data(), 0);
  if (len == 0 || len > recordsMost(c)) return refuse(c, "bad rank info length");
  if (c.buf.size() < 4 + len) return;
  const auto body = std::span<const std::byte>(c.buf.data() + 4, len);
  if (nroots_ > 0) {
    auto infos = decodeRankBlock(body, c.rank, c.count);
    if (!infos.ok()) return refuse(c, infos.status().message());
    c.infos = std::move(infos).value();
  } else {
    auto info = decodeRankInfo(body);
    if (!info.ok() || info->rank != c.rank)
      return refuse(c, info.ok() ? "rank info names another rank" : info.status().message());
    c.infos.push_back(std::move(info).value());
  }
  c.buf.erase(c.buf.begin(), c.buf.begin() + 4 + len);
  have_ += c.count;
  for (int r = c.rank; r < c.rank + c.count; ++r) came_[r] = true;
}

void BootstrapRoot::onFull(Client& c) {
  if (c.buf.size() < kRootFrameHeaderBytes) return;
  auto h = decodeRootFrameHeader(std::span<const std::byte>(c.buf.data(), kRootFrameHeaderBytes), maxTableBytes(nranks_));
  if (!h.ok() || h->type != RootFrame::kFull)
    return refuse(c, h.ok() ? "not the table of every rank" : h.status().message());
  if (c.buf.size() < kRootFrameHeaderBytes + h->length) return;
  auto full = openTable(std::span<const std::byte>(c.buf.data() + kRootFrameHeaderBytes, h->length), nranks_,
                        cfg_.bootKey, c.clientNonce, c.serverNonce, leaderTableTag);
  if (!full.ok()) return refuse(c, "the table of every rank: " + full.status().message());
  // What the leader brings back holds this block as this root gathered it.
  const RankBlock b = rankBlock(nranks_, nroots_, index_);
  for (int r = b.first; r < b.end; ++r) {
    const Client* o = owner_[r];
    if (o && encodeRankInfo(full->table[r]) != encodeRankInfo(o->infos[r - o->rank]))
      return refuse(c, "the table of every rank differs from this root's block at rank " + std::to_string(r));
  }
  c.awaitingFull = false;
  sendTables(full->blob, full->secret, &c);
  wipeKey(full->secret.key);
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
  const size_t most = c.awaitingFull ? kRootFrameHeaderBytes + maxTableBytes(nranks_)
                      : c.helloDone  ? 4 + recordsMost(c)
                                     : kMaxHelloAndInfo;
  if (c.buf.size() + n > most)
    return refuse(c, c.infos.empty() ? "sent more than a hello and its rank records" : "sent more than its table");
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
  if (c.infos.empty()) onRecords(c);
  if (!c.fd || c.infos.empty() || c.buf.empty()) return;
  if (c.awaitingFull) return onFull(c);
  refuse(c, "sent more than a hello and its rank records");
}

std::vector<std::byte> BootstrapRoot::gathered(int first, int end) const {
  std::vector<RankInfo> infos;
  for (int r = first; r < end; ++r) infos.push_back(owner_[r]->infos[r - owner_[r]->rank]);
  return encodeRankTable(infos);
}

void BootstrapRoot::sendBlock() {
  // The block to its leader, who brings it to root 0 and the table of every rank back here.
  const RankBlock b = rankBlock(nranks_, nroots_, index_);
  Client& leader = *owner_[b.first];
  std::vector<std::byte> body = gathered(b.first, b.end);
  const Tag t = blockTag(cfg_.bootKey, leader.clientNonce, leader.serverNonce, body);
  body.insert(body.end(), t.begin(), t.end());
  blocksOut_.fetch_add(1);  // counted first, as a table (sendTables)
  sendFrame(leader, RootFrame::kBlock, body, sendBy());
  leader.awaitingFull = true;
  blockSent_ = true;
}

Deadline BootstrapRoot::sendBy() const {
  // At least the grace from now: the table may go out after the root's deadline (a rank that
  // joined late, within its own), and a table larger than a socket buffer needs its time.
  return cfg_.deadline.at() - Clock::now() >= std::chrono::milliseconds(kRootGraceMs) ? cfg_.deadline
                                                                                   : Deadline::afterMs(kRootGraceMs);
}

void BootstrapRoot::sendTables(std::span<const std::byte> blob, const CommSecret& secret, const Client* skip) {
  for (auto& cp : clients_) {
    Client& c = *cp;
    if (!c.fd || c.infos.empty()) continue;
    // Done with every rank that brought its records; a connection still in its hello stays
    // (a lingering root's late claim).
    struct Close {
      Client& c;
      ~Close() { c.fd.reset(); }
    } close{c};
    if (&c == skip) continue;
    const auto body = sealedTable(blob, secret, cfg_.bootKey, c.clientNonce, c.serverNonce, tableTag);
    // Counted first: the rank may be done with the table before this thread runs again.
    tablesOut_.fetch_add(1);
    sendFrame(c, RootFrame::kTable, body, sendBy());  // each its own grace past the deadline
  }
  tableSent_ = true;
  owner_.clear();
}

void BootstrapRoot::run() {
  pthread_setname_np(pthread_self(), "reccl-bootroot");
  std::unique_lock state(stateMu_);
  for (;;) {
    // A failed root answers ranks still on their way (connected before it failed, or within their
    // deadline) with its failure, rather than leaving them to wait out their deadline.
    if (failed_ && (cfg_.deadline.expired() || cfg_.deadline.isNever())) return;
    if (tableSent_ && !cfg_.lingerUntilStopped) return;
    if (!tableSent_ && cfg_.deadline.expired() &&
        (have_ == 0 || Clock::now() - cfg_.deadline.at() >=
                           std::chrono::milliseconds(kRootWaitPastDeadlineMs))) {
      const std::string missing = missingText();
      failAll("not every rank joined before the deadline (" + std::to_string(have_) + " of " +
              std::to_string(nranks_ ? expected() : 0) + " here" + (missing.empty() ? "" : "; " + missing) + ")");
      return;
    }
    std::vector<pollfd> pfds;
    pfds.push_back({stopEvent_.get(), POLLIN, 0});
    pfds.push_back({listen_.get(), POLLIN, 0});
    for (auto& c : clients_) pfds.push_back({c->fd.get(), POLLIN, 0});
    state.unlock();
    int rc = poll(pfds.data(), pfds.size(), 100);
    state.lock();
    if (rc < 0 && errno != EINTR) {
      RECCL_WARN(kLogBootstrap, "bootstrap root poll: %s", strerror(errno));
      return;
    }
    if (pfds[0].revents & POLLIN) return;
    size_t polled = clients_.size();
    if (pfds[1].revents & POLLIN) onAccept();
    for (size_t i = 0; i < polled; ++i) {
      Client& c = *clients_[i];
      if (!c.fd) continue;
      if (!c.helloDone && c.helloBy.expired()) {
        refuse(c, "no hello in time");
        continue;
      }
      if (pfds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) onReadable(c);
    }
    std::erase_if(clients_, [](const std::unique_ptr<Client>& c) { return !c->fd; });
    if (failed_ || tableSent_ || blockSent_ || nranks_ == 0 || have_ != expected()) continue;
    if (nroots_ > 0 && index_ > 0) {
      sendBlock();
    } else {
      CommSecret secret{randomKey(), randomNonzeroU64()};
      sendTables(gathered(0, nranks_), secret, nullptr);
      wipeKey(secret.key);
    }
  }
}

}  // namespace reccl::core
