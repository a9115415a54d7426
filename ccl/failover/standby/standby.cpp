#include "failover/standby/standby.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "core/handshake.h"
#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/monitor.h"
#include "failover/rebalance/rail_picker.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {

constexpr int64_t kStandbyConnectMs = 1000;
constexpr uint64_t kTendPeriodNs = 20'000'000;    // upkeep every 20 ms while standbys are being made
constexpr uint64_t kCheckPeriodNs = 300'000'000;  // else a look at the standbys in place (3 stall-check ticks)
constexpr uint64_t kNotReadyRetryNs = 50'000'000; // the peer has not set the connection up yet
constexpr uint64_t kRefusedRetryNs = 10'000'000'000;  // the peer refused (standby paths off there)
// A standby in place is made anew on the best rail when its own rail costs more than this times
// the best one's (RailPicker::standbyRailFor's (load + 1) / weight).
constexpr double kReplaceStandbyCost = 1.25;
constexpr uint64_t kReplaceEveryNs = 2'000'000'000;  // at most one such re-placement try per 2 s

// Closes an idle standby at once (no goodbye on a dead link) and forgets it.
void discard(std::unique_ptr<transport::Link>& link) noexcept {
  if (!link) return;
  link->closeNow();
  link.reset();
}

}  // namespace

uint64_t standbyBackoffNs(uint32_t failures) {
  if (failures <= 1) return kStandbyRetryNs;
  const uint32_t doublings = std::min<uint32_t>(failures - 1, 16);
  return std::min(kStandbyRetryNs << doublings, kStandbyRetryMaxNs);
}

Standbys::~Standbys() { stop(); }

Status Standbys::init() {
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) return Status::FromErrno(errno, "failover: eventfd");
  return Status::Ok();
}

void Standbys::start() { watcher_ = std::thread([this] { watcherLoop(); }); }

void Standbys::wakeWatcher() noexcept {
  if (wakeFd_ < 0) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wakeFd_, &one, sizeof(one));
}

void Standbys::stopWatcher() noexcept {
  wakeWatcher();
  if (watcher_.joinable()) watcher_.join();
}

void Standbys::closeAll() noexcept {
  {
    std::lock_guard lk(psMu_);
    passive_.clear();
  }
  for (auto& c : ctx_.conns.snapshot()) {
    std::lock_guard lk(c->sbMu);
    c->standby.reset();
  }
  if (wakeFd_ >= 0) close(wakeFd_);
  wakeFd_ = -1;
}

uint64_t Standbys::tend(uint64_t nowNs) {
  // Quick while a standby is on its way or a connection is moving (it needs a new one after);
  // otherwise only the liveness look (a dead standby is also caught when it is taken).
  uint64_t next = nowNs + kCheckPeriodNs;
  if (!ctx_.cfg.standbyOn) return next;
  RailPicker& picker = *ctx_.picker;
  // One count for the pass; the standby jobs queued below pick their rail with the loads of
  // their moment (make).
  StandbyLoads loads = [&] {
    auto pk = picker.lock();
    return picker.standbyLoads();
  }();
  for (auto& c : ctx_.conns.snapshot()) {
    if (c->relayVia.load() >= 0 || c->port->failed()) continue;
    if (c->busy.load() || c->jobs.busy() || c->standbyMaking.load()) {
      next = std::min(next, nowNs + kTendPeriodNs);
      continue;
    }
    {
      std::lock_guard lk(c->sbMu);
      if (c->standby) {
        int sr = c->standbyRail;
        bool usable = sr != c->rail.load() && ctx_.rails.up(sr) && ((ctx_.rails.peerRails(c->peer) >> sr) & 1u) &&
                      c->standby->alive();
        if (!usable) {
          RECCL_TRACE(kLogFailover, "rank %d: standby of %s on rail %d retired", ctx_.cfg.rank,
                      connName(c->id).c_str(), sr);
          discard(c->standby);
          c->standbyRail = -1;
          loads.dropStandby({c->role, c->rail.load(), c->standbyTarget.exchange(-1)});
        } else {
          // Placed when the loads were others (before a failover or fail-back moved
          // connections): a standby whose rail now costs clearly more than the best one is made
          // anew there, so the connections of a rail keep spreading when it fails. The old one
          // stays until the new one is in place (make swaps them); the margin and the pause after
          // each try keep noise in the measured weights from moving standbys back and forth.
          if (nowNs < c->standbyRetryNs) continue;
          std::pair<double, double> cost;
          {
            auto pk = picker.lock();
            if (picker.standbyRailFor(*c, loads, &cost, sr) < 0 || cost.first <= kReplaceStandbyCost * cost.second)
              continue;
          }
          RECCL_TRACE(kLogFailover,
                      "rank %d: standby of %s on rail %d to be made anew on a rail with fewer of its rail's standbys",
                      ctx_.cfg.rank, connName(c->id).c_str(), sr);
          c->standbyReplace.store(true);
          c->standbyRetryNs = nowNs + kReplaceEveryNs;
        }
      }
      if (!c->standbyReplace.load() && nowNs < c->standbyRetryNs) {
        next = std::min(next, c->standbyRetryNs);
        continue;
      }
    }
    if (picker.standbyRailFor(*c, loads) < 0) continue;  // no other rail now: looked at again with the rails' next change
    c->standbyMaking.store(true);
    ctx_.migration->queueStandby(c->id, nowNs);
    next = std::min(next, nowNs + kTendPeriodNs);
  }
  return next;
}

void Standbys::make(Conn& c) {
  if (ctx_.stopping() || ctx_.broken() || c.port->failed()) return;
  RailPicker& picker = *ctx_.picker;
  int rail;
  {
    // Picked and claimed at once: standby jobs of the connections of one rail run side by side.
    auto pk = picker.lock();
    rail = picker.standbyRailFor(c);
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
  const int peer = c.peer;
  uint32_t gen;  // a retryFailedNow during this try asks for the next try at once
  {
    std::lock_guard lk(c.sbMu);
    gen = c.standbyRetryGen;
  }
  auto retryAfter = [&](uint64_t ns, const Status& why) {
    std::lock_guard lk(c.sbMu);
    c.standbyRetryNs = monotonicNs() + ns;
    if (ns >= kStandbyRetryNs)
      RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d: %s", ctx_.cfg.rank, connName(c.id).c_str(), rail,
                 why.message().c_str());
  };
  // A try that failed on the way (connect, hello, the peer's answer): the next one waits longer
  // each time in a row.
  auto failed = [&](const Status& why) {
    std::lock_guard lk(c.sbMu);
    const uint32_t n = ++c.standbyFailures;
    c.standbyFailedRail = rail;
    const uint64_t ns = c.standbyRetryGen != gen ? 0 : standbyBackoffNs(++c.standbyBackoffStep);
    c.standbyRetryNs = monotonicNs() + ns;
    RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d: try %u, next in %llu ms: %s", ctx_.cfg.rank,
               connName(c.id).c_str(), rail, n, static_cast<unsigned long long>(ns / 1'000'000), why.message().c_str());
  };
  auto dl = Deadline::afterMs(kStandbyConnectMs);
  auto made = ctx_.paths.connect(peer, rail, dl);
  if (!made.ok()) return failed(made.status());
  std::unique_ptr<transport::Link> link = std::move(made).value();

  // Authenticated like any data connection; the request says it is a standby (nothing commits).
  uint32_t marker = nextEpoch(1, c.role);  // a migration-looking epoch of this end's parity
  MigrateRequest req;
  fillRequest(&req, ctx_, c, MigrateReason::kStandby, rail, marker);
  std::array<std::byte, kMigrateRequestBytes> out;
  encodeMigrateRequest(req, out);
  const transport::LinkEnd end{c.port, c.role == Role::kSender, rail, marker, true};
  transport::ByteIo io = link->io(dl);
  const core::Key& key = ctx_.host.key();
  auto session = core::sendAuthHello(io, dataHello(ctx_, peer, c.id.channel, marker), key, core::AuthPurpose::kData, out);
  Status s = session.status();
  if (s.ok()) s = link->sendRecord(io, end);
  if (s.ok()) s = core::readProof(io, key, *session);
  std::array<std::byte, kMigrateReplyBytes> rb;
  if (s.ok()) s = io.recv(rb);
  if (!s.ok()) return failed(s);
  auto rep = decodeMigrateReply(rb);
  if (!rep.ok()) return failed(rep.status());
  ctx_.monitor->peerReported(peer, rep->railsUp);
  // The peer's authenticated answer came over `rail`, whatever it says: the rail carries to the
  // peer, and a streak of failed tries ends. Ended on this rail, the rail carries again: the
  // monitor hears of it on the way out of this try (the standby in place by then, sbMu let go).
  uint32_t failedHere = 0;
  struct Tell {
    FailoverContext& ctx;
    int peer, rail;
    const uint32_t& failed;
    ~Tell() {
      if (failed) ctx.monitor->railCarriesAgain(peer, rail, failed);
    }
  } tell{ctx_, peer, rail, failedHere};
  {
    std::lock_guard lk(c.sbMu);
    if (c.standbyFailures > 0) {
      RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d (%s) answered after %u failed tries", ctx_.cfg.rank,
                 connName(c.id).c_str(), rail, ctx_.nicName(rail), c.standbyFailures);
      if (c.standbyFailedRail == rail) failedHere = c.standbyFailures;
    }
    c.standbyFailures = 0;
    c.standbyFailedRail = -1;
    c.standbyBackoffStep = 0;
  }
  if (rep->status == MigrateStatus::kNotReady) return retryAfter(kNotReadyRetryNs, Status::Ok());
  if (rep->status != MigrateStatus::kOk)  // standby paths off there, or its communicator failed
    return retryAfter(kRefusedRetryNs, Status(Errc::kPeerFailure, "refused by rank " + std::to_string(peer)));
  if (s = link->takePeerRecord(io, end); !s.ok()) return failed(s);
  link->keepIdle();
  std::lock_guard lk(c.sbMu);
  // Meanwhile the connection may have moved onto that rail, or the rail gone down: not a standby.
  // A standby already there stays unless this one was made to replace it.
  const bool replace = c.standbyReplace.exchange(false);
  if ((c.standby && !replace) || c.rail.load() == rail || !ctx_.rails.up(rail)) {
    c.standbyTarget.store(c.standby ? c.standbyRail : -1);
    claim.kept = true;
    return discard(link);
  }
  if (c.standby)
    RECCL_TRACE(kLogFailover, "rank %d: standby of %s moves from rail %d to rail %d", ctx_.cfg.rank,
                connName(c.id).c_str(), c.standbyRail, rail);
  discard(c.standby);
  c.standby = std::move(link);
  c.standbyRail = rail;
  claim.kept = true;
  RECCL_TRACE(kLogFailover, "rank %d: standby of %s on rail %d (%s)", ctx_.cfg.rank, connName(c.id).c_str(), rail,
              ctx_.nicName(rail));
}

std::unique_ptr<transport::Link> Standbys::take(Conn& c, const Job& j, uint64_t tried, int* rail) {
  if (!ctx_.cfg.standbyOn) return nullptr;
  std::lock_guard lk(c.sbMu);
  if (!c.standby) return nullptr;
  int sr = c.standbyRail;
  bool wasTried = sr >= 0 && sr < 64 && ((tried >> sr) & 1u);
  if (sr == j.fromRail || sr == c.rail.load() || !ctx_.rails.up(sr) || !((ctx_.rails.peerRails(c.peer) >> sr) & 1u) ||
      wasTried)
    return nullptr;
  std::unique_ptr<transport::Link> link = std::move(c.standby);
  c.standbyRail = -1;
  c.standbyTarget.store(-1);
  if (!link->alive()) {
    RECCL_INFO(kLogFailover, "rank %d: standby of %s on rail %d is dead; connecting instead", ctx_.cfg.rank,
               connName(c.id).c_str(), sr);
    return nullptr;
  }
  *rail = sr;
  return link;
}

void Standbys::dropRail(int rail) {
  if (!ctx_.cfg.standbyOn) return;
  for (auto& c : ctx_.conns.snapshot()) {
    std::lock_guard lk(c->sbMu);
    if (c->standby && c->standbyRail == rail) {
      c->standbyTarget.store(-1);
      discard(c->standby);
      c->standbyRail = -1;
    }
  }
  {
    std::lock_guard lk(psMu_);
    std::erase_if(passive_, [&](Passive& p) {
      if (p.rail != rail) return false;
      discard(p.link);
      return true;
    });
  }
  wakeWatcher();
}

void Standbys::retryFailedNow() {
  if (!ctx_.cfg.standbyOn) return;
  for (auto& c : ctx_.conns.snapshot()) {
    std::lock_guard lk(c->sbMu);
    ++c->standbyRetryGen;
    c->standbyBackoffStep = 0;
    c->standbyRetryNs = 0;
  }
}

void Standbys::retryFailedNow(int peer, int rail) {
  if (!ctx_.cfg.standbyOn) return;
  for (auto& c : ctx_.conns.snapshot()) {
    if (c->peer != peer) continue;
    std::lock_guard lk(c->sbMu);
    if (c->standbyFailedRail != rail && c->standbyTarget.load() != rail) continue;
    ++c->standbyRetryGen;
    c->standbyRetryNs = 0;
  }
}

void Standbys::registerPassive(std::unique_ptr<transport::Link> link, const ConnId& id, int peer, int rail) {
  link->keepIdle();
  RECCL_TRACE(kLogFailover, "rank %d: standby of %s from rank %d on rail %d", ctx_.cfg.rank, connName(id).c_str(),
              peer, rail);
  {
    std::lock_guard lk(psMu_);
    // One standby per connection and initiating end: a newer one replaces it.
    std::erase_if(passive_, [&](const Passive& p) { return p.id == id && p.peer == peer; });
    passive_.push_back(Passive{std::move(link), id, peer, rail});
  }
  // The peer reached this rank on a new connection on `rail`: what failed this end's tries to it
  // there (a fault at the peer's end, which this rank's rails never showed) may be over.
  retryFailedNow(peer, rail);
  wakeWatcher();
}

// The passive end of standby paths: one thread polls them all and serves a request at once on
// this thread (a standby handshake is short: no connect, the request is already here).
void Standbys::watcherLoop() {
  ctx_.threads.enter("standby watcher", "reccl-standby");
  std::vector<pollfd> pfds;
  while (!ctx_.stopping()) {
    pfds.clear();
    pfds.push_back({wakeFd_, POLLIN, 0});
    {
      std::lock_guard lk(psMu_);
      for (auto& p : passive_) pfds.push_back({p.link->waitFd(), POLLIN | POLLRDHUP, 0});
    }
    int rc = ::poll(pfds.data(), pfds.size(), 1000);
    if (ctx_.stopping()) break;
    if (rc <= 0) continue;
    if (pfds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = read(wakeFd_, &v, sizeof(v));
    }
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      Timeline tl;
      tl.queuedNs = tl.runningNs = monotonicNs();
      Passive ps;
      {
        std::lock_guard lk(psMu_);
        auto it = std::find_if(passive_.begin(), passive_.end(),
                               [&](const Passive& p) { return p.link->waitFd() == pfds[i].fd; });
        if (it == passive_.end()) continue;
        // A descriptor number reused by a newer standby since the poll: nothing to read yet.
        if (!it->link->hasInput()) continue;
        ps = std::move(*it);
        passive_.erase(it);
      }
      std::array<std::byte, kMigrateRequestBytes> buf;
      Status s = ps.link->io(Deadline::afterMs(1000)).recv(buf);
      if (!s.ok()) {
        // The initiator closed it (replaced, its rail down, communicator gone): nothing to do.
        RECCL_TRACE(kLogFailover, "rank %d: standby of %s from rank %d closed: %s", ctx_.cfg.rank,
                    connName(ps.id).c_str(), ps.peer, s.message().c_str());
        continue;
      }
      tl.replyNs = monotonicNs();
      auto req = decodeMigrateRequest(buf);
      if (!req.ok() || req->reason == MigrateReason::kStandby || req->conn != ps.id || req->rail != ps.rail) {
        RECCL_WARN(kLogFailover, "rank %d: bad request on the standby of %s from rank %d: %s", ctx_.cfg.rank,
                   connName(ps.id).c_str(), ps.peer,
                   req.ok() ? "does not match the standby" : req.status().message().c_str());
        continue;
      }
      core::Hello h;  // what the standby's hello proved, for the usual checks
      h.kind = core::HelloKind::kTcpData;
      h.srcRank = ps.peer;
      h.dstRank = ctx_.cfg.rank;
      h.channel = ps.id.channel;
      h.epoch = req->epoch;
      // Served here, one after the other, although a rail fault brings both directions of a peer
      // pair within microseconds: handing each to a migrator thread to commit in parallel is no
      // faster on 2 cores (both commits wait for the same progress engine) and adds a thread
      // wake-up.
      ctx_.migration->servePassive(std::move(ps.link), h, *req, tl);
    }
  }
}

}  // namespace reccl::failover
