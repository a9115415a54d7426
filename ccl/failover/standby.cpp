// Pre-connected standby paths (RECCL_FAILOVER_STANDBY): each TCP connection keeps, from each of
// its ends, an idle connection to the peer on another rail, opened in the background once the
// connection exists and authenticated like a migration (data hello with the job secret, then a
// MigrateRequest with reason `standby`, answered by the peer, which only records it). A failover
// then sends the request over the standby and waits for the reply: no connect, no hello, no pass
// through the peer's data listener (the peer's standby watcher thread reads the request and
// commits at once). Each end opens its own standby so a socket has one initiator and requests
// never cross. Liveness: keepalive (a dead standby errors within ~4 s), a poll at every upkeep,
// and one more look when it is taken; standbys on a rail that goes down here are closed, and one
// used (or now on the rail in use, after a fail-back) is replaced by the monitor's upkeep.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/comm.h"
#include "failover/failover.h"
#include "failover/rebalance.h"
#include "reccl/common/log.h"
#include "transport/socket_util.h"

namespace reccl::failover {
namespace {

constexpr int64_t kStandbyConnectMs = 1000;
constexpr uint64_t kTendPeriodNs = 20'000'000;    // upkeep every 20 ms while standbys are being made
constexpr uint64_t kCheckPeriodNs = 300'000'000;  // else a look at the standbys in place (3 stall-check ticks)
constexpr uint64_t kRetryNs = 500'000'000;        // after a failed standby, wait before the next
constexpr uint64_t kNotReadyRetryNs = 50'000'000; // the peer has not set the connection up yet
constexpr uint64_t kRefusedRetryNs = 10'000'000'000;  // the peer refused (standby paths off there)
// A standby in place is made anew on the best rail when its own rail costs more than this times
// the best one's (standbyRailFor's (load + 1) / weight).
constexpr double kReplaceStandbyCost = 1.25;
constexpr uint64_t kReplaceEveryNs = 2'000'000'000;  // at most one such re-placement try per 2 s

// An idle standby has nothing in flight, so only keepalive can tell that it died: probe after
// 1 s idle, every 1 s, give up after 3 unanswered (the kernel then errors the socket).
void armStandby(int fd) {
  int one = 1, idle = 1, intvl = 1, cnt = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

// An idle standby that shows anything (data, EOF, error) is no longer usable.
bool standbyAlive(int fd) {
  pollfd pf{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&pf, 1, 0) != 0) return false;
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_ESTABLISHED;
}

// Closes an idle standby with a reset (SO_LINGER 0) rather than a FIN: on a dead link the kernel
// would retransmit the FIN for seconds, and a retransmit-counting detector counts that against
// the rail once it is back. A standby holds no data, so nothing is lost.
void closeStandby(UniqueFd& fd) noexcept {
  if (!fd) return;
  linger lg{1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  fd.reset();
}

}  // namespace

int Failover::standbyRailFor(Conn& c, std::pair<double, double>* score, int scoreRail) {
  auto w = railWeights(c.peer);
  int cur = c.rail.load();
  if (cur >= 0 && cur < nrails_) w[cur] = 0;
  std::vector<int> load = railLoads(c.role);
  for (auto& d : snapshot()) {
    if (d.get() == &c || d->role != c.role || d->rail.load() != cur) continue;
    int t = d->standbyTarget.load();
    if (t >= 0 && t < nrails_) ++load[t];
  }
  int best = pickRail(load, w, -1);
  if (score) {
    auto cost = [&](int r) { return r >= 0 && r < nrails_ && w[r] > 0 ? (load[r] + 1) / w[r] : 0.0; };
    *score = {cost(scoreRail), cost(best)};
  }
  return best;
}

uint64_t Failover::tendStandbys(uint64_t nowNs) {
  // Quick while a standby is on its way or a connection is moving (it needs a new one after);
  // otherwise only the liveness look (a dead standby is also caught when it is taken).
  uint64_t next = nowNs + kCheckPeriodNs;
  if (!standbyOn_) return next;
  bool queued = false;
  for (auto& c : snapshot()) {
    if (c->relayVia.load() >= 0 || c->port->failed()) continue;
    if (c->busy.load() || c->queued.load() || c->standbyMaking.load()) {
      next = std::min(next, nowNs + kTendPeriodNs);
      continue;
    }
    {
      std::lock_guard lk(c->sbMu);
      if (c->standby) {
        int sr = c->standbyRail;
        bool usable = sr != c->rail.load() && railUp(sr) && ((peerRails(c->peer) >> sr) & 1u) &&
                      standbyAlive(c->standby.get());
        if (!usable) {
          RECCL_TRACE(kLogFailover, "rank %d: standby of %s on rail %d retired", rank_, connName(c->id).c_str(), sr);
          closeStandby(c->standby);
          c->standbyRail = -1;
          c->standbyTarget.store(-1);
        } else {
          // Placed when the loads were others (before a failover or fail-back moved
          // connections): a standby whose rail now costs clearly more than the best one is made
          // anew there, so the connections of a rail keep spreading when it fails. The old one
          // stays until the new one is in place (makeStandby swaps them); the margin and the
          // pause after each try keep noise in the measured weights from moving standbys back
          // and forth.
          if (nowNs < c->standbyRetryNs) continue;
          std::pair<double, double> cost;
          {
            std::lock_guard pk(pickMu_);
            if (standbyRailFor(*c, &cost, sr) < 0 || cost.first <= kReplaceStandbyCost * cost.second) continue;
          }
          RECCL_TRACE(kLogFailover, "rank %d: standby of %s on rail %d to be made anew on a rail with fewer of its rail's standbys",
                      rank_, connName(c->id).c_str(), sr);
          c->standbyReplace.store(true);
          c->standbyRetryNs = nowNs + kReplaceEveryNs;
        }
      }
      if (!c->standbyReplace.load() && nowNs < c->standbyRetryNs) {
        next = std::min(next, c->standbyRetryNs);
        continue;
      }
    }
    if (standbyRailFor(*c) < 0) continue;  // no other rail now: looked at again with the rails' next change
    c->standbyMaking.store(true);
    Job j;
    j.id = c->id;
    j.reason = MigrateReason::kStandby;
    j.queuedNs = nowNs;
    {
      std::lock_guard lk(qMu_);
      jobs_.push_back(j);
    }
    queued = true;
    next = std::min(next, nowNs + kTendPeriodNs);
  }
  if (queued) qCv_.notify_one();
  return next;
}

void Failover::makeStandby(Conn& c) {
  if (stop_.load() || broken() || c.port->failed()) return;
  int rail;
  {
    // Picked and claimed at once: standby jobs of the connections of one rail run side by side.
    std::lock_guard pk(pickMu_);
    rail = standbyRailFor(c);
    c.standbyTarget.store(rail);
  }
  // Every way out without a standby on `rail` gives the claim up: back to the standby the
  // connection still has (a re-placement that failed keeps the old one), else none.
  struct Claim {
    Conn& c;
    bool kept = false;
    ~Claim() {
      if (kept) return;
      std::lock_guard lk(c.sbMu);
      c.standbyTarget.store(c.standby ? c.standbyRail : -1);
      c.standbyReplace.store(false);
    }
  } claim{c};
  if (rail < 0) return;
  int peer = c.peer;
  const auto& pi = comm_.table_[peer];
  const auto& src = comm_.myNics_[rail];
  if (static_cast<size_t>(rail) >= pi.nics.size()) return;
  auto retryAfter = [&](uint64_t ns, const Status& why) {
    std::lock_guard lk(c.sbMu);
    c.standbyRetryNs = monotonicNs() + ns;
    if (ns >= kRetryNs)
      RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d: %s", rank_, connName(c.id).c_str(), rail,
                 why.message().c_str());
  };
  transport::Endpoint dst{pi.nics[rail].addr, pi.dataPort};
  auto dl = Deadline::afterMs(kStandbyConnectMs);
  auto fdr = transport::connectTcp(dst, src.addr, src.name == "lo" ? "" : src.name, dl);
  if (!fdr.ok()) return retryAfter(kRetryNs, fdr.status());
  UniqueFd fd = std::move(fdr).value();
  // The options every data socket gets (comm.cpp): a standby becomes one.
  transport::tuneDataSocket(fd.get(), src.name);

  // Authenticated like any data connection; the request says it is a standby (nothing commits).
  uint32_t marker = nextEpoch(1, c.role);  // a migration-looking epoch of this end's parity
  core::Hello h = dataHello(peer, c.id.channel, marker);
  MigrateRequest req;
  req.conn = c.id;
  req.initiator = c.role;
  req.reason = MigrateReason::kStandby;
  req.rail = static_cast<uint16_t>(rail);
  req.epoch = marker;
  req.railsUp = railsUp_.load();
  std::array<std::byte, kMigrateRequestBytes> out;
  encodeMigrateRequest(req, out);
  core::ByteIo io = core::socketIo(fd.get(), dl);
  auto session = core::sendAuthHello(io, h, comm_.key_, core::AuthPurpose::kData, out);
  Status s = session.status();
  if (s.ok()) s = core::readProof(io, comm_.key_, *session);
  std::array<std::byte, kMigrateReplyBytes> rb;
  if (s.ok()) s = io.recv(rb);
  if (!s.ok()) return retryAfter(kRetryNs, s);
  auto rep = decodeMigrateReply(rb);
  if (!rep.ok()) return retryAfter(kRetryNs, rep.status());
  setPeerRails(peer, rep->railsUp);
  if (rep->status == MigrateStatus::kNotReady) return retryAfter(kNotReadyRetryNs, Status::Ok());
  if (rep->status != MigrateStatus::kOk)  // standby paths off there, or its communicator failed
    return retryAfter(kRefusedRetryNs, Status(Errc::kPeerFailure, "refused by rank " + std::to_string(peer)));
  armStandby(fd.get());
  std::lock_guard lk(c.sbMu);
  // Meanwhile the connection may have moved onto that rail, or the rail gone down: not a standby.
  // A standby already there stays unless this one was made to replace it.
  const bool replace = c.standbyReplace.exchange(false);
  if ((c.standby && !replace) || c.rail.load() == rail || !railUp(rail)) {
    c.standbyTarget.store(c.standby ? c.standbyRail : -1);
    claim.kept = true;
    return closeStandby(fd);
  }
  if (c.standby)
    RECCL_TRACE(kLogFailover, "rank %d: standby of %s moves from rail %d to rail %d", rank_, connName(c.id).c_str(),
                c.standbyRail, rail);
  closeStandby(c.standby);
  c.standby = std::move(fd);
  c.standbyRail = rail;
  claim.kept = true;
  RECCL_TRACE(kLogFailover, "rank %d: standby of %s on rail %d (%s)", rank_, connName(c.id).c_str(), rail,
              src.name.c_str());
}

UniqueFd Failover::takeStandby(Conn& c, const Job& j, const std::set<int>& tried, int* rail) {
  if (!standbyOn_) return UniqueFd();
  std::lock_guard lk(c.sbMu);
  if (!c.standby) return UniqueFd();
  int sr = c.standbyRail;
  if (sr == j.fromRail || sr == c.rail.load() || !railUp(sr) || !((peerRails(c.peer) >> sr) & 1u) || tried.count(sr))
    return UniqueFd();
  UniqueFd fd = std::move(c.standby);
  c.standbyRail = -1;
  c.standbyTarget.store(-1);
  if (!standbyAlive(fd.get())) {
    RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d is dead; connecting instead", rank_,
               connName(c.id).c_str(), sr);
    return UniqueFd();
  }
  *rail = sr;
  return fd;
}

void Failover::dropStandbys(int rail) {
  if (!standbyOn_) return;
  for (auto& c : snapshot()) {
    std::lock_guard lk(c->sbMu);
    if (c->standby && c->standbyRail == rail) {
      c->standbyTarget.store(-1);
      closeStandby(c->standby);
      c->standbyRail = -1;
    }
  }
  std::lock_guard lk(psMu_);
  std::erase_if(passiveStandbys_, [&](PassiveStandby& p) {
    if (p.rail != rail) return false;
    closeStandby(p.fd);
    return true;
  });
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(sbWakeFd_, &one, sizeof(one));
}

void Failover::registerPassiveStandby(PassiveStandby ps) {
  armStandby(ps.fd.get());
  RECCL_TRACE(kLogFailover, "rank %d: standby of %s from rank %d on rail %d", rank_, connName(ps.id).c_str(), ps.peer,
              ps.rail);
  std::lock_guard lk(psMu_);
  // One standby per connection and initiating end: a newer one replaces it.
  std::erase_if(passiveStandbys_, [&](const PassiveStandby& p) { return p.id == ps.id && p.peer == ps.peer; });
  passiveStandbys_.push_back(std::move(ps));
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(sbWakeFd_, &one, sizeof(one));
}

// The passive end of standby paths: one thread polls them all and serves a request at once on
// this thread (a standby handshake is short: no connect, the request is already here).
void Failover::standbyWatcherLoop() {
  applyThreadSched("standby watcher", "reccl-standby");
  std::vector<pollfd> pfds;
  while (!stop_.load()) {
    pfds.clear();
    pfds.push_back({sbWakeFd_, POLLIN, 0});
    {
      std::lock_guard lk(psMu_);
      for (auto& p : passiveStandbys_) pfds.push_back({p.fd.get(), POLLIN | POLLRDHUP, 0});
    }
    int rc = ::poll(pfds.data(), pfds.size(), 1000);
    if (stop_.load()) break;
    if (rc <= 0) continue;
    if (pfds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = read(sbWakeFd_, &v, sizeof(v));
    }
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      Timeline tl;
      tl.queuedNs = tl.runningNs = monotonicNs();
      PassiveStandby ps;
      {
        std::lock_guard lk(psMu_);
        auto it = std::find_if(passiveStandbys_.begin(), passiveStandbys_.end(),
                               [&](const PassiveStandby& p) { return p.fd.get() == pfds[i].fd; });
        if (it == passiveStandbys_.end()) continue;
        // A descriptor number reused by a newer standby since the poll: nothing to read yet.
        std::byte peek;
        ssize_t pk = recv(it->fd.get(), &peek, 1, MSG_PEEK | MSG_DONTWAIT);
        if (pk < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        ps = std::move(*it);
        passiveStandbys_.erase(it);
      }
      std::array<std::byte, kMigrateRequestBytes> buf;
      Status s = transport::recvAll(ps.fd.get(), buf, Deadline::afterMs(1000));
      if (!s.ok()) {
        // The initiator closed it (replaced, its rail down, communicator gone): nothing to do.
        RECCL_TRACE(kLogFailover, "rank %d: standby of %s from rank %d closed: %s", rank_, connName(ps.id).c_str(),
                    ps.peer, s.message().c_str());
        continue;
      }
      tl.replyNs = monotonicNs();
      auto req = decodeMigrateRequest(buf);
      if (!req.ok() || req->reason == MigrateReason::kStandby || req->conn != ps.id || req->rail != ps.rail) {
        RECCL_WARN(kLogFailover, "rank %d: bad request on the standby of %s from rank %d: %s", rank_,
                   connName(ps.id).c_str(), ps.peer, req.ok() ? "does not match the standby" : req.status().message().c_str());
        continue;
      }
      core::Hello h;  // what the standby's hello proved, for the usual checks
      h.kind = core::HelloKind::kTcpData;
      h.srcRank = ps.peer;
      h.dstRank = rank_;
      h.channel = ps.id.channel;
      h.epoch = req->epoch;
      // Served here, one after the other, although a rail fault brings both directions of a peer
      // pair within microseconds: handing each to a migrator thread to commit in parallel was
      // measured no faster on 2 cores (the second commit still ended ~0.55 ms after the first,
      // p50 over 38 faults: both wait for the same socket engine) and added a thread wake-up.
      servePassive(std::move(ps.fd), h, *req, tl);
    }
  }
}

}  // namespace reccl::failover
