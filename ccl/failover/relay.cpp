// The relay route: a connection whose rail failed here is forwarded through a same-host rank's
// NIC. This rank (the origin) keeps its end of the connection; its path becomes a shared-memory
// pipe to the relay rank, which copies the bytes unchanged to and from a TCP connection from its
// own NIC to the peer's (relay_server.h). The peer sees an ordinary migration of the connection
// (the origin's hello and MigrateRequest travel through the pipe), so the epoch/step handshake,
// resend from slots and duplicate drops are the direct route's, end to end.
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstring>

#include "core/comm.h"
#include "failover/failover.h"
#include "failover/relay_wire.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

namespace reccl::failover {
namespace {

constexpr int64_t kAttemptMs = 1000;

// Connects to the relay rank's control socket (abstract namespace), answers its challenge with
// one message (the sealed hello, `open`, the three descriptors) and returns the socket with the
// session whose proof the reply carries.
Result<UniqueFd> openControl(const std::string& name, const core::Hello& hello, const core::Key& key,
                             std::span<const std::byte> open, const int (&fds)[3], Deadline dl,
                             core::Session* session) {
  UniqueFd s(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s) return Status::FromErrno(errno, "relay control: socket");
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  if (connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return Status::FromErrno(errno, "relay control: connect @" + name);
  std::array<std::byte, core::kChallengeBytes> ch;
  pollfd pf{s.get(), POLLIN, 0};
  if (::poll(&pf, 1, std::max(0, dl.remainingMsForPoll())) <= 0 ||
      ::recv(s.get(), ch.data(), ch.size(), MSG_DONTWAIT) != static_cast<ssize_t>(ch.size()))
    return Status(Errc::kTimeout, "relay control: no challenge from @" + name);
  RECCL_ASSIGN_OR_RETURN(core::Nonce server, core::decodeChallenge(ch, core::AuthPurpose::kRelay));
  std::vector<std::byte> msg(core::kAuthHelloBytes + open.size());
  *session = core::sealHello(hello, key, server, std::span<std::byte, core::kAuthHelloBytes>(msg.data(), core::kAuthHelloBytes));
  std::memcpy(msg.data() + core::kAuthHelloBytes, open.data(), open.size());
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{msg.data(), msg.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = cbuf;
  m.msg_controllen = sizeof(cbuf);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  if (sendmsg(s.get(), &m, MSG_NOSIGNAL) != static_cast<ssize_t>(msg.size()))
    return Status::FromErrno(errno, "relay control: sendmsg");
  return s;
}

}  // namespace

Status Failover::startRelay() {
  route_ = params::FailoverRoute();
  if (route_ != "auto" && route_ != "direct" && route_ != "relay")
    return Status(Errc::kInvalidArgument, "RECCL_FAILOVER_ROUTE=" + route_ + " is not auto, direct or relay");
  nicAffinity_ = params::NicAffinity();
  // Every rank with a same-host peer serves relays whatever its own route: the origin decides.
  if (comm_.topo_.localNranks < 2) return Status::Ok();
  RelayServerConfig cfg;
  cfg.rank = rank_;
  cfg.nranks = comm_.nranks_;
  cfg.key = comm_.key_;
  cfg.commId = comm_.commId_;
  cfg.pid = comm_.table_[rank_].pid;
  cfg.hostOf = comm_.topo_.hostOf;
  for (int r = 0; r < nrails_ && static_cast<size_t>(r) < comm_.myNics_.size(); ++r) {
    cfg.nicName.push_back(comm_.myNics_[r].name);
    cfg.nicAddr.push_back(comm_.myNics_[r].addr);
  }
  for (const auto& ri : comm_.table_) {
    std::vector<uint32_t> addrs;
    for (const auto& n : ri.nics) addrs.push_back(n.addr);
    cfg.peerNic.push_back(std::move(addrs));
    cfg.peerPort.push_back(ri.dataPort);
  }
  cfg.railUp = [this](int r) { return railUp(r); };
  cfg.railsUp = [this] { return railsUp_.load(); };
  cfg.broken = [this] { return broken(); };
  auto srv = RelayServer::create(std::move(cfg));
  // Without a relay server this rank cannot forward for others; its own failovers still work.
  if (!srv.ok())
    RECCL_WARN(kLogFailover, "rank %d: relay server unavailable: %s", rank_, srv.status().message().c_str());
  else
    relay_ = std::move(srv).value();
  return Status::Ok();
}

void Failover::stopRelay() {
  // Own relayed paths first (their relays then drop the peer connections), then wait for the
  // same-host ranks this rank forwards for: their last steps may still be passing through.
  for (auto& c : snapshot())
    if (c->relayVia.load() >= 0)
      if (channel::Path* p = c->port->path()) p->shutdown();
  if (relay_) relay_->stop(std::min<int64_t>(10000, std::max<int64_t>(timeoutMs_, 1000)));
}

void Failover::relayRailDown(int rail) {
  if (relay_) relay_->breakRail(rail);
}

bool Failover::routeWantsRelay(const Conn& c, const Job& j) {
  if (route_ == "direct" || comm_.topo_.localNranks < 2) return false;
  // relay: when this rank's own NIC failed under the connection (or its relay did). A stall with
  // the rail healthy here points at the far end, which a same-host NIC would not avoid.
  if (route_ == "relay") return c.relayVia.load() >= 0 || j.fromRail < 0 || !railUp(j.fromRail);
  if (!nicAffinity_) return false;
  // auto under NIC affinity: this rank may use its own NIC (local rank mod rails) and the rails
  // its connections use fault-free; relay only when none of those reaches the peer.
  uint64_t affine = 1ull << (comm_.topo_.localRank % nrails_);
  for (auto& o : snapshot())
    if (o->preferredRail >= 0 && o->preferredRail < nrails_) affine |= 1ull << o->preferredRail;
  uint64_t usable = affine & railsUp_.load() & peerRails(c.peer);
  if (j.fromRail >= 0 && j.fromRail < nrails_) usable &= ~(1ull << j.fromRail);
  return usable == 0;
}

std::vector<std::pair<int, int>> Failover::relayCandidates(const Conn& c, const Job& j) {
  std::vector<std::pair<int, int>> out;
  const auto& t = comm_.topo_;
  uint64_t peerUp = peerRails(c.peer);
  uint64_t hereUp = railsUp_.load();
  for (int r = 0; r < comm_.nranks_; ++r) {
    if (r == rank_ || r == c.peer || t.hostOf[r] != t.hostOf[rank_]) continue;
    // The relay's own NICs first (the rails its channels use), then any other rail.
    std::vector<int> rails;
    for (int ch = 0; ch < t.nchannels; ++ch) rails.push_back(core::railFor(t, r, ch));
    for (int k = 0; k < nrails_; ++k) rails.push_back(k);
    std::vector<bool> seen(nrails_, false);
    for (int rail : rails) {
      if (rail < 0 || rail >= nrails_ || seen[rail]) continue;
      seen[rail] = true;
      if (rail == j.fromRail || !((peerUp >> rail) & 1u)) continue;
      // Same-host ranks usually share the host's NICs: a rail down here is down for them too.
      if (!((hereUp >> rail) & 1u)) continue;
      if (static_cast<size_t>(rail) >= comm_.table_[c.peer].nics.size()) continue;
      out.emplace_back(r, rail);
    }
  }
  return out;
}

Failover::RelayOutcome Failover::relayFirst(Conn& c, const Job& j, Deadline deadline) {
  if (!routeWantsRelay(c, j)) return RelayOutcome::kFallBack;
  auto cands = relayCandidates(c, j);
  if (cands.empty()) {
    RECCL_WARN(kLogFailover, "rank %d: %s: no same-host rank can relay (RECCL_FAILOVER_ROUTE=%s); direct route",
               rank_, connName(c.id).c_str(), route_.c_str());
    return RelayOutcome::kFallBack;
  }
  for (auto [via, rail] : cands) {
    for (int tries = 0; tries < 20 && !deadline.expired() && !stop_.load() && !broken(); ++tries) {
      uint32_t epoch = 0;
      uint64_t resent = 0;
      Status err;
      Attempt a = relayAttempt(c, via, rail, j, deadline, &err, &epoch, &resent);
      if (a == Attempt::kDone) {
        relayMigrations_.fetch_add(1);
        logMigration(c, j, epoch, rail, resent, true, monotonicNs());
        RECCL_WARN(kLogFailover, "rank %d: %s relayed via rank %d (its rail %d, %s)", rank_, connName(c.id).c_str(),
                   via, rail, comm_.table_[via].nics[rail].name.c_str());
        return RelayOutcome::kDone;
      }
      if (a == Attempt::kStale) return RelayOutcome::kStale;
      if (a == Attempt::kNotReady) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      RECCL_INFO(kLogFailover, "rank %d: %s: relay via rank %d rail %d failed: %s", rank_, connName(c.id).c_str(), via,
                 rail, err.message().c_str());
      break;
    }
    if (deadline.expired() || stop_.load() || broken()) break;
  }
  RECCL_WARN(kLogFailover, "rank %d: %s: no relay worked; trying the direct route", rank_, connName(c.id).c_str());
  return RelayOutcome::kFallBack;
}

Failover::Attempt Failover::relayAttempt(Conn& c, int via, int rail, const Job& j, Deadline deadline, Status* err,
                                         uint32_t* epochOut, uint64_t* resentOut) {
  int peer = c.peer;
  auto atMost = Deadline::afterMs(kAttemptMs);
  Deadline dl = atMost.at() < deadline.at() ? atMost : deadline;
  // The pipe holds a full slot window each way, so the relay never throttles the sender.
  size_t ringBytes = static_cast<size_t>(comm_.opts_.slots) * (comm_.opts_.chunkBytes + channel::kStepHeaderBytes);
  auto pipeR = RelayPipe::create(std::min<size_t>(ringBytes, 64u << 20));
  if (!pipeR.ok()) {
    *err = pipeR.status();
    return Attempt::kFailed;
  }
  RelayLink link;
  link.pipe = std::move(pipeR).value();
  link.via = via;

  // 1. Ask the relay to connect to the peer on `rail`.
  std::array<std::byte, kRelayOpenBytes> om;
  RelayOpen open;
  open.conn = c.id;
  open.peer = peer;
  open.rail = static_cast<uint16_t>(rail);
  encodeRelayOpen(open, om);
  int fds[3] = {link.pipe.memFd(), link.pipe.originWakeFd(), link.pipe.relayWakeFd()};
  core::Session session;
  auto ctrl = openControl(RelayServer::socketName(comm_.table_[via].pid, comm_.commId_, via),
                          dataHello(via, c.id.channel, 1), comm_.key_, om, fds, dl, &session);
  if (!ctrl.ok()) {
    *err = ctrl.status();
    return Attempt::kFailed;
  }
  link.ctrl = std::move(ctrl).value();
  {
    pollfd pf{link.ctrl.get(), POLLIN, 0};
    int rc = ::poll(&pf, 1, std::max(0, dl.remainingMsForPoll()));
    std::array<std::byte, core::kTagBytes + kRelayReplyBytes + 1> rb;
    ssize_t n = rc > 0 ? ::recv(link.ctrl.get(), rb.data(), rb.size(), MSG_DONTWAIT) : -1;
    if (n <= 0) {
      *err = Status(Errc::kTimeout, "relay rank " + std::to_string(via) + " did not answer");
      return Attempt::kFailed;
    }
    // An answer with the proof leads with it; one without (the hello was refused) is a refusal.
    auto body = std::span<const std::byte>(rb.data(), static_cast<size_t>(n));
    bool proven = body.size() == core::kTagBytes + kRelayReplyBytes;
    if (proven && !core::verifyProofTag(comm_.key_, session.client, session.server, body.first(core::kTagBytes))) {
      *err = Status(Errc::kPermission, "relay rank " + std::to_string(via) + " does not hold this communicator's key");
      return Attempt::kFailed;
    }
    auto rep = decodeRelayReply(proven ? body.subspan(core::kTagBytes) : body);
    if (!rep.ok()) {
      *err = rep.status();
      return Attempt::kFailed;
    }
    if (rep->status != RelayStatus::kOk || !proven) {
      *err = Status(Errc::kLinkFailure, "relay rank " + std::to_string(via) + ": " + relayStatusName(rep->status));
      return Attempt::kFailed;
    }
  }

  // 2. The ordinary migration handshake with the peer, through the pipe (the direct route's
  // code: same hello and request, same reply handling, same commit, with the pipe as the path).
  RelayLink* lp = &link;
  int ctrlFd = link.ctrl.get();
  HandshakeIo io{[lp, ctrlFd, dl](std::span<const std::byte> b) { return lp->pipe.writeAll(b, ctrlFd, dl); },
                 [lp, ctrlFd, dl](std::span<std::byte> b) { return lp->pipe.readAll(b, ctrlFd, dl); }};
  Timeline tl;
  Attempt a = handshake(c, rail, j, true, io, UniqueFd(), &link, err, epochOut, resentOut, &tl);
  if (a == Attempt::kFailed) *err = err->Wrap("migration handshake via relay rank " + std::to_string(via));
  return a;
}

void Failover::startRelayPath(Conn& c, RelayLink link, uint64_t resume, uint32_t epoch, int rail) {
  std::string desc = "relay via rank " + std::to_string(link.via) + " rail " + std::to_string(rail) + " " +
                     connName(c.id) + " epoch " + std::to_string(epoch);
  if (c.role == Role::kSender) {
    auto path = std::make_unique<RelaySendPath>(std::move(link), static_cast<channel::SendPort*>(c.port), desc, resume);
    auto* raw = path.get();
    c.port->setPath(std::move(path));
    raw->start();
  } else {
    auto path = std::make_unique<RelayRecvPath>(std::move(link), static_cast<channel::RecvPort*>(c.port), desc);
    auto* raw = path.get();
    c.port->setPath(std::move(path));
    raw->start();
  }
}

}  // namespace reccl::failover
