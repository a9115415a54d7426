#include "failover/monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "failover/context.h"
#include "failover/migration/migration.h"
#include "failover/rebalance/rail_meter.h"
#include "failover/relay/relay_route.h"
#include "failover/standby/standby.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {
constexpr uint64_t kNever = UINT64_MAX;
constexpr uint64_t kMsNs = 1'000'000ull;
// Work due this close to a wake-up runs in it (poll's timeout is in whole milliseconds).
constexpr uint64_t kCoalesceNs = 2 * kMsNs;
constexpr uint64_t kGrayTickNs = 50 * kMsNs;  // a held DEGRADED is re-judged this often
constexpr uint64_t kMaxSleepNs = 1000 * kMsNs;
// How long a connection may sit on the path a failed move retired before this end moves it: the
// peer whose handshake failed retries within its next attempt (1 s each) when it can.
constexpr int64_t kRetiredGraceMs = 2000;
constexpr uint64_t kEarlyReplyNs = static_cast<uint64_t>(Migration::kEarlyReplyMs) * kMsNs;
}  // namespace

namespace {
// The span the detector's retransmit evidence reaches, in its windows (grayFactsNow).
int evidenceWindows(const Settings& cfg) { return static_cast<int>(std::max<int64_t>(2, cfg.retransPoolWindows + 1)); }
}  // namespace

Monitor::Monitor(FailoverContext& ctx)
    : ctx_(ctx), sources_(ctx, *this), failBackRetry_(static_cast<size_t>(std::max(0, ctx.cfg.nrails))) {
  const uint64_t windowNs = static_cast<uint64_t>(std::max<int64_t>(1, ctx.cfg.retransWindowMs)) * 1'000'000ull;
  for (int r = 0; r < ctx.rails.nrails(); ++r) peerLoss_.push_back({PeerLossWindows(windowNs, evidenceWindows(ctx.cfg))});
}

Monitor::~Monitor() { stop(); }

Status Monitor::init() {
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) return Status::FromErrno(errno, "failover: eventfd");
  return sources_.init();
}

void Monitor::start() { thread_ = std::thread([this] { loop(); }); }

void Monitor::stop() noexcept {
  if (wakeFd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(wakeFd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  sources_.stop();
  if (wakeFd_ >= 0) close(wakeFd_);
  wakeFd_ = -1;
}

void Monitor::wake() noexcept {
  if (ctx_.stopping() || wakeFd_ < 0) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wakeFd_, &one, sizeof(one));
}

uint64_t Monitor::stallScanPeriodNs() const {
  // A path is declared stalled after the stall time without an answer: a look every 1/20 of that
  // adds at most 5 % to the in-band detection time.
  return std::clamp<uint64_t>(static_cast<uint64_t>(ctx_.cfg.stallMs) * kMsNs / 20, 5 * kMsNs, 100 * kMsNs);
}

void Monitor::loop() {
  // The node daemon, the in-process detector or the NIC poll, as RECCL_DETECTOR asks and the
  // host allows (health/fault_sources.h); tick() keeps that choice alive (fallback, reconnect).
  ctx_.threads.enter("monitor", "reccl-monitor");
  threadId_.store(std::this_thread::get_id(), std::memory_order_release);
  sources_.start();
  const bool standbyOn = ctx_.cfg.standbyOn;
  const uint64_t scanPeriod = stallScanPeriodNs();
  uint64_t nextPoll = 0, nextScan = 0, nextSources = 0;
  std::vector<pollfd> fds;
  // Soft deadlines fall on the stall check's ticks, so that an idle monitor wakes once for all.
  auto onScanTick = [&](uint64_t due) {
    if (nextScan == kNever || due <= nextScan) return due;
    return nextScan + (due - nextScan + scanPeriod - 1) / scanPeriod * scanPeriod;
  };
  while (!ctx_.stopping()) {
    if (ctx_.broken()) {
      // The communicator failed: nothing left to watch or move; wait for stop.
      pollfd pf{wakeFd_, POLLIN, 0};
      ::poll(&pf, 1, static_cast<int>(kMaxSleepNs / kMsNs));
      continue;
    }
    uint64_t now = monotonicNs();
    bool tracked = !ctx_.conns.empty();
    if (!tracked) nextScan = kNever;
    else if (nextScan == kNever) nextScan = now;
    uint64_t due = std::min(nextSources, now + kMaxSleepNs);
    // Connections are made lazily by the first collective on them, and nothing tells the monitor:
    // it looks for new ones (two try_locks and a count when there are none) at the stall check's
    // period, so their stall check and standbys start within that. Once some are tracked the
    // stall check's own ticks do it.
    if (!tracked) due = std::min(due, now + scanPeriod);
    if (sources_.pollActive()) due = std::min(due, nextPoll);
    if (tracked) due = std::min({due, nextScan, onScanTick(ctx_.meter->dueNs())});
    if (standbyOn && tracked) due = std::min(due, standbyDueNs_ == 0 ? now : onScanTick(standbyDueNs_));
    if (ctx_.rails.anyHeld()) due = std::min(due, now + kGrayTickNs);
    if (uint64_t fb = failBackDueNs(); fb) due = std::min(due, fb);
    fds.assign({{wakeFd_, POLLIN, 0}, {sources_.detectorFd(), POLLIN, 0}, {sources_.daemonFd(), POLLIN, 0}});
    for (const Job& j : early_) {
      fds.push_back({j.early->link->waitFd(), POLLIN, 0});
      due = std::min(due, j.early->sentNs + kEarlyReplyNs);
    }
    int timeoutMs = due <= now ? 0 : static_cast<int>((due - now + kMsNs - 1) / kMsNs);
    int rc = ::poll(fds.data(), fds.size(), timeoutMs);  // fd -1 entries are ignored
    if (ctx_.stopping()) break;
    if (ctx_.broken()) continue;
    if (rc > 0 && (fds[0].revents & POLLIN)) {
      uint64_t v;
      [[maybe_unused]] auto n = read(wakeFd_, &v, sizeof(v));
    }
    if (!early_.empty()) concludeReplied(std::span<const pollfd>(fds).subspan(3), monotonicNs());
    // Connections made since the last wake-up first, so that a fault event covers them; new ones
    // (found here or on another thread) get their standbys at once.
    ctx_.conns.refresh();
    if (ctx_.conns.takeAdded()) standbyDueNs_ = 0;
    if (rc > 0 && (fds[1].revents & POLLIN)) sources_.drainDetector();
    now = monotonicNs();
    const uint64_t soon = now + kCoalesceNs;
    sources_.tick(now, rc > 0 ? fds[2].revents : 0);
    nextSources = sources_.dueNs(now);
    if (sources_.pollActive() && nextPoll <= soon) {
      sources_.pollNics(now);
      nextPoll = now + static_cast<uint64_t>(ctx_.cfg.pollMs) * kMsNs;
    }
    if (nextScan <= soon) {
      scanStalls(now);
      nextScan = now + scanPeriod;
    }
    tendGray(now);
    for (uint64_t owed = standbyFailBacksOwed_.exchange(0, std::memory_order_acq_rel); owed; owed &= owed - 1) {
      const int r = std::countr_zero(owed);
      if (r < static_cast<int>(failBackRetry_.size()) && !failBackRetry_[r].dueNs)
        failBackRetry_[r] = {now + kFailBackRetryFirstNs, 0, FaultSource::kStandby};
    }
    tendFailBacks(now);
    ctx_.meter->meter(now);  // rail weights from measured throughput; cheap until due
    if (standbyOn && standbyDueNs_ <= soon) standbyDueNs_ = ctx_.standbys->tend(now);
  }
  // The communicator is going: replies still owed are not waited for.
  for (Job& j : early_) j.early->link->closeNow();
  early_.clear();
}

void Monitor::concludeReplied(std::span<const pollfd> polled, uint64_t nowNs) {
  // In the order the requests went out (polled[i] is early_[i]'s standby; revents stay 0 when
  // poll timed out); a request whose reply is not there stays polled until its time is up (a
  // migrator thread then carries on from a failed try).
  std::vector<Job> waiting;
  std::vector<channel::Path*> drainLater;
  for (size_t i = 0; i < early_.size(); ++i) {
    Job& j = early_[i];
    const bool replied = i < polled.size() && polled[i].revents != 0;
    if (replied || nowNs >= j.early->sentNs + kEarlyReplyNs)
      ctx_.migration->concludeEarly(std::move(j), replied, drainLater);
    else
      waiting.push_back(std::move(j));
  }
  early_.swap(waiting);
  // The old paths the commits retired, once all of them are on their new paths (each port keeps
  // its retired paths: these stay valid).
  for (channel::Path* p : drainLater) p->drain();
}

void Monitor::scanStalls(uint64_t nowNs) {
  for (auto& c : ctx_.conns.snapshot()) {
    if (c->busy.load() || c->jobs.busy() || c->port->failed()) continue;
    const int rail = c->rail.load();
    channel::Path* path = c->port->path();
    if (!path) continue;
    // A commit that failed after it retired the old path left the connection on it: its I/O has
    // stopped, so no engine reports it and the transport's sample below cannot tell it from an
    // idle path. The peer whose handshake it was tries again at once if it can reach this end
    // (busy then, skipped above); once it had time for that, this end moves the connection.
    if (auto j = leftOnRetiredPath(c->id, rail, path, c->retired.load(), c->retiredNs.load(), nowNs,
                                   std::max<int64_t>(ctx_.cfg.stallMs, kRetiredGraceMs))) {
      RECCL_WARN(kLogFailover, "rank %d: %s (rail %d) is still on the path a failed move retired %llu ms ago: moving it",
                 ctx_.cfg.rank, connName(c->id).c_str(), rail,
                 static_cast<unsigned long long>((nowNs - j->faultNs) / kMsNs));
      ctx_.migration->enqueue(*j);
      continue;
    }
    // Something outstanding and no answer from the peer for the stall time: the path is dead,
    // whichever end of it failed (the transport's verdict: transport/tcp_health.h for TCP).
    transport::PathSample s = ctx_.paths.sample(*path, ctx_.cfg.stallMs);
    if (!s.known || !s.stalled) continue;
    Job j = stallMove(c->id, rail, path, s.quietMs, nowNs);
    RECCL_WARN(kLogFailover, "rank %d: no %s ack for %u ms on rank %d->%d ch %u (rail %d): path stalled",
               ctx_.cfg.rank, ctx_.paths.name(), s.quietMs, c->id.sender, c->id.receiver, c->id.channel, j.fromRail);
    ctx_.migration->enqueue(j);
  }
}

GrayFacts Monitor::grayFactsNow(int rail, uint64_t nowNs) {
  // As far back as the detector's evidence reaches: the running window and the one before it,
  // or, pooling, the pool's closed windows and the running one (gray.h); an RDMA port's
  // sequence errors, its sliding window (or its pool's windows) and the sample before it (a
  // tenth of the window, 10..100 ms: detector/rdma_loss.h).
  const int64_t windows = evidenceWindows(ctx_.cfg);
  uint64_t windowNs = static_cast<uint64_t>(std::max<int64_t>(1, ctx_.cfg.retransWindowMs)) * 1'000'000ull *
                      static_cast<uint64_t>(windows);
  const int64_t rdmaMs = std::max<int64_t>(0, ctx_.cfg.rdmaLossWindowMs);
  const int64_t rdmaSpanMs = rdmaMs * std::max<int64_t>(1, ctx_.cfg.rdmaLossPoolWindows);
  windowNs = std::max<uint64_t>(
      windowNs, static_cast<uint64_t>(rdmaSpanMs + std::clamp<int64_t>(rdmaMs / 10, 10, 100)) * 1'000'000ull);
  return ctx_.rails.grayFacts(rail, nowNs, windowNs);
}

bool Monitor::healthyPeersLose(int rail, const GrayFacts& facts) {
  const uint64_t nowNs = facts.nowNs;
  PeerLoss& pl = peerLoss_[static_cast<size_t>(rail)];
  if (nowNs < pl.dueNs) return false;
  const int64_t windowMs = std::max<int64_t>(1, ctx_.cfg.retransWindowMs);
  const uint64_t everyNs = static_cast<uint64_t>(std::clamp<int64_t>(windowMs / 5, 20, 100)) * 1'000'000ull;
  // A reading long overdue (this thread held up) would put the whole gap's counts in one window.
  if (pl.dueNs && nowNs > pl.dueNs + 2 * everyNs) {
    pl.windows.reset();
    pl.crossings = 0;
  }
  pl.dueNs = nowNs + everyNs;
  // The known fault's own retransmits: a peer with the rail down, or that told of a fault of its
  // own within the evidence's reach (its new sockets may still resend what the fault held up).
  // Judged again at every verdict: a peer that tells of one later leaves the sums it was in.
  const PeerLossWindows::Witness witness = [&](int peer) {
    return ctx_.rails.peerHealthy(peer, rail, nowNs, facts.windowNs);
  };
  pl.windows.beginRound(nowNs);
  for (auto& c : ctx_.conns.snapshot()) {
    if (c->rail.load() != rail || c->relayVia.load() >= 0 || !witness(c->peer)) continue;
    const channel::Path* path = c->port->path();
    if (!path) continue;
    const transport::LossSample s = ctx_.paths.loss(*path);
    if (s.known) pl.windows.add(s.pathId, c->peer, s.lost, s.sent);
  }
  pl.windows.endRound();
  const LossRule rule{static_cast<uint64_t>(std::max<int64_t>(1, ctx_.cfg.retransThreshold)),
                      static_cast<uint64_t>(std::max<int64_t>(0, ctx_.cfg.retransPerMille)) * 1000,
                      ctx_.cfg.retransPoolWindows > 0};
  // Two readings in a row (at least 20 ms apart): a clump of spurious fast retransmits is taken
  // back by its D-SACKs within about two round trips, as the detector's settle time allows.
  pl.crossings = pl.windows.gray(rule, witness) ? pl.crossings + 1 : 0;
  if (pl.crossings < 2) return false;
  const LossCount sum = pl.windows.kept(witness);
  std::string peers;
  for (int p : pl.windows.losingPeers(witness)) peers += (peers.empty() ? "" : ",") + std::to_string(p);
  RECCL_WARN(kLogFailover,
             "rank %d: rail %d (%s) degraded, held for a peer's fault, but its connections to rank(s) %s, which have it "
             "up, lost %llu of %llu segments in the last %lld ms: a gray failure of the rail, not the peer's fault",
             ctx_.cfg.rank, rail, ctx_.nicName(rail), peers.c_str(), static_cast<unsigned long long>(sum.lost),
             static_cast<unsigned long long>(sum.sent), static_cast<long long>(windowMs * evidenceWindows(ctx_.cfg)));
  return true;
}

void Monitor::tendGray(uint64_t nowNs) {
  const uint64_t clearNs = static_cast<uint64_t>(std::max<int64_t>(0, ctx_.cfg.degradedClearMs)) * 1'000'000ull;
  for (int r = 0; r < ctx_.rails.nrails(); ++r) {
    GrayHold& h = ctx_.rails.hold(r);
    PeerLoss& pl = peerLoss_[static_cast<size_t>(r)];
    // The readings count only while they run without a break: a gap's counter changes are no
    // evidence of this span (this end's own fault or move in reach, or nothing held).
    auto stopReading = [&pl] {
      pl.windows.reset();
      pl.dueNs = 0;
      pl.crossings = 0;
    };
    if (h.sinceNs == 0) {
      stopReading();
      continue;
    }
    const GrayFacts facts = grayFactsNow(r, nowNs);
    if (grayExplained(facts)) {
      const bool peersTell = onlyAPeerExplainsGray(facts);
      if (!peersTell) stopReading();
      if (!peersTell || !healthyPeersLose(r, facts)) {
        h.explainedNs = nowNs;
        continue;
      }
      stopReading();
      const FaultSource src = h.src;
      h.sinceNs = 0;
      takeRailDown(r, src, nowNs, MigrateReason::kDegraded, 0, 0);
      continue;
    }
    stopReading();
    if (!heldGrayIsReal(nowNs, h.explainedNs, clearNs)) continue;
    RECCL_WARN(kLogFailover, "rank %d: rail %d (%s) still degraded %llu ms after the known fault ended: gray failure",
               ctx_.cfg.rank, r, ctx_.nicName(r), static_cast<unsigned long long>((nowNs - h.explainedNs) / 1'000'000ull));
    FaultSource src = h.src;
    h.sinceNs = 0;
    railDown(r, src, nowNs, MigrateReason::kDegraded);
  }
}

void Monitor::railDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason, uint64_t emitNs) {
  const uint64_t seenNs = emitNs ? monotonicNs() : 0;
  RailState& rs = ctx_.rails;
  if (reason == MigrateReason::kDegraded && rs.up(rail)) {
    uint64_t now = monotonicNs();
    if (grayExplainedNow(rail, now)) {
      GrayHold& h = rs.hold(rail);
      if (h.sinceNs == 0) {
        h.sinceNs = now;
        h.explainedNs = now;
        h.src = src;
      }
      auto ago = [now](uint64_t t) { return t ? static_cast<long long>((now - t) / 1'000'000ull) : -1ll; };
      RECCL_INFO(kLogFailover,
                 "rank %d: rail %d (%s) degraded signal held: retransmits of a known fault or move (ms ago, -1 never: "
                 "a peer last reported the rail down or back up %lld, back up here %lld, connections moved off it %lld)",
                 ctx_.cfg.rank, rail, ctx_.nicName(rail), ago(rs.peerReportNs(rail)), ago(h.upNs), ago(rs.leftNs(rail)));
      return;
    }
  }
  takeRailDown(rail, src, signalNs, reason, emitNs, seenNs);
}

void Monitor::takeRailDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason, uint64_t emitNs,
                           uint64_t seenNs) {
  RailState& rs = ctx_.rails;
  rs.hold(rail).sinceNs = 0;
  if (rail >= 0 && rail < static_cast<int>(failBackRetry_.size())) failBackRetry_[rail] = {};  // the next up event owes it
  const bool hard = reason != MigrateReason::kDegraded;
  if (!rs.markDown(rail)) {
    // Already out. A hard fault on a DEGRADED rail still counts: connections that stayed on it
    // (no healthy rail to move to then) must move now, not wait for the in-band stall check.
    if (!hard || rs.hold(rail).hardDown) return;
  }
  rs.hold(rail).hardDown = hard;
  rs.setGray(rail, !hard);
  rs.bumpEpoch(rail);
  ctx_.conns.refresh();  // a connection made since the last wake-up moves too (no walk when none was)
  // The jobs first: the log line and the relay's bookkeeping are not on the fault's path.
  for (auto& c : ctx_.conns.snapshot()) {
    // A relayed connection does not use this rank's NIC (its relay reports its own faults).
    if (c->rail.load() != rail || c->relayVia.load() >= 0) continue;
    Job j{.id = c->id,
          .reason = reason,
          .source = src,
          .fromRail = rail,
          .faultNs = signalNs,
          .emitNs = emitNs,
          .seenNs = seenNs};
    // Over a standby the request goes out from here, and the reply is read here.
    if (auto sent = ctx_.migration->beginEarly(j)) early_.push_back(std::move(*sent));
  }
  const bool named = src == FaultSource::kDetector || src == FaultSource::kDaemon;
  RECCL_WARN(kLogFailover, "rank %d: rail %d (%s) %s (source %s%s%s)", ctx_.cfg.rank, rail, ctx_.nicName(rail),
             reason == MigrateReason::kDegraded ? "degraded" : "down", faultSourceName(src), named ? " " : "",
             named ? sources_.lastSignalSource().c_str() : "");
  ctx_.relay->railDown(rail);       // pipes this rank forwards over the rail break; their origins move them
  ctx_.standbys->dropRail(rail);    // standby paths on the rail are as dead as the rail
  ctx_.standbys->retryFailedNow();
  standbyDueNs_ = 0;                // and the upkeep replaces them (and those the migrations take) soon
}

void Monitor::railBackUp(int rail, uint64_t signalNs, FaultSource src) {
  RailState& rs = ctx_.rails;
  // Also the detector's clear of a held DEGRADED: the retransmits stopped, nothing to do.
  if (rail >= 0 && rail < rs.nrails()) rs.hold(rail).sinceNs = 0;
  if (!rs.markUp(rail)) return;
  rs.setGray(rail, false);
  GrayHold& h = rs.hold(rail);
  if (h.hardDown) h.upNs = monotonicNs();
  h.hardDown = false;
  rs.bumpEpoch(rail);
  RECCL_INFO(kLogFailover, "rank %d: rail %d (%s) up again after hold-down; failing back (source %s)", ctx_.cfg.rank,
             rail, ctx_.nicName(rail), faultSourceName(src));
  ctx_.standbys->retryFailedNow();
  standbyDueNs_ = 0;  // standbys on the rail that is back, and for the connections that leave it
  // Fail-back first: a connection that prefers this rail goes back to it even when it sits on a
  // gray rail. One job per connection at a time (enqueue): moved by weight first it would leave
  // its gray rail for another one and only then go home; the weight's job that waits behind the
  // fail-back finds it moved.
  if (enqueueFailBacks(rail, src, signalNs) > 0 && rail < static_cast<int>(failBackRetry_.size()))
    failBackRetry_[rail] = {monotonicNs() + kFailBackRetryFirstNs, 0, src};
  moveOffGrayRails(-1, src, signalNs);  // the rest of what stayed on a gray rail: by weight
}

namespace {
bool awayFromPreferred(const Conn& c, int rail) { return c.preferredRail == rail && c.rail.load() != rail; }
}  // namespace

int Monitor::enqueueFailBacks(int rail, FaultSource src, uint64_t signalNs, int peer) {
  int n = 0;
  for (auto& c : ctx_.conns.snapshot()) {
    if (!awayFromPreferred(*c, rail) || (peer >= 0 && c->peer != peer)) continue;
    ctx_.migration->enqueue(Job{.id = c->id,
                                .reason = MigrateReason::kFailBack,
                                .source = src,
                                .fromRail = c->rail.load(),
                                .toRail = rail,
                                .faultNs = signalNs});
    ++n;
  }
  return n;
}

uint64_t Monitor::failBackDueNs() const noexcept {
  uint64_t due = 0;
  for (const auto& f : failBackRetry_)
    if (f.dueNs && (!due || f.dueNs < due)) due = f.dueNs;
  return due;
}

void Monitor::tendFailBacks(uint64_t nowNs) {
  for (int r = 0; r < static_cast<int>(failBackRetry_.size()); ++r) {
    FailBackRetry& f = failBackRetry_[r];
    if (!f.dueNs || f.dueNs > nowNs) continue;
    if (!ctx_.rails.up(r)) {
      f = {};  // down or gray again: its next up event owes the fail-back
      continue;
    }
    int away = 0, owed = 0;  // owed: away with no job or handshake on it now
    for (auto& c : ctx_.conns.snapshot())
      if (awayFromPreferred(*c, r)) {
        ++away;
        if (!c->busy.load() && !c->jobs.busy()) ++owed;
      }
    if (away == 0) {
      f = {};  // all home
      continue;
    }
    if (owed == 0) {
      f.dueNs = nowNs + kFailBackRetryFirstNs;  // the jobs on them now decide; look again later
      continue;
    }
    ++f.tries;
    RECCL_INFO(kLogFailover, "rank %d: rail %d (%s) up, %d connection(s) that prefer it still elsewhere: fail-back again (try %d)",
               ctx_.cfg.rank, r, ctx_.nicName(r), owed, f.tries + 1);
    enqueueFailBacks(r, f.src, nowNs);
    f.dueNs = nowNs + failBackRetryWaitNs(f.tries);
  }
}

void Monitor::peerReported(int peer, uint64_t railsUp) {
  uint64_t now = monotonicNs();
  uint64_t gained = ctx_.rails.setPeerRails(peer, railsUp, now);
  // A rail back at the peer and up here: a healthy route for what stayed on a gray rail.
  if (gained & ctx_.rails.upMask()) moveOffGrayRails(peer, FaultSource::kPeer, now);
}

void Monitor::railCarriesAgain(int peer, int rail, uint32_t failedTries) {
  if (ctx_.stopping() || ctx_.broken() || rail < 0 || rail >= ctx_.cfg.nrails || rail >= 64) return;
  if (!ctx_.rails.up(rail) || !((ctx_.rails.peerRails(peer) >> rail) & 1u)) return;
  const uint64_t now = monotonicNs();
  {
    std::lock_guard lk(carriesMu_);
    if (!carriesHoldLets(carries_[{peer, rail}], now)) return;
  }
  const int n = enqueueFailBacks(rail, FaultSource::kStandby, now, peer);
  if (n == 0) return;
  RECCL_INFO(kLogFailover,
             "rank %d: rail %d (%s) carries to rank %d again (a standby after %u failed tries): fail-back of %d "
             "connection(s)",
             ctx_.cfg.rank, rail, ctx_.nicName(rail), peer, failedTries, n);
  // A fail-back's one try can fail (the rail stops carrying again): the monitor thread offers it
  // again while the rail stays up, as after an up event.
  standbyFailBacksOwed_.fetch_or(1ull << rail, std::memory_order_acq_rel);
  wake();
}

void Monitor::moveOffGrayRails(int peer, FaultSource src, uint64_t signalNs) {
  const uint64_t up = ctx_.rails.upMask();
  for (auto& c : ctx_.conns.snapshot()) {
    const int cur = c->rail.load();
    if (peer >= 0 && c->peer != peer) continue;
    if (cur < 0 || cur >= ctx_.cfg.nrails || ((up >> cur) & 1u) || c->relayVia.load() >= 0) continue;
    ctx_.migration->enqueue(Job{.id = c->id,
                                .reason = MigrateReason::kDegraded,
                                .source = src,
                                .fromRail = cur,
                                .faultNs = signalNs});
  }
}

bool Monitor::onPathFailure(const channel::PortId& id, const channel::Path* self, bool isSender, const Status& s) {
  // Runs on the progress thread: decide and queue, never block.
  if (ctx_.stopping() || ctx_.broken()) return false;
  ConnId cid = isSender ? ConnId{id.self, id.peer, static_cast<uint32_t>(id.channel)}
                        : ConnId{id.peer, id.self, static_cast<uint32_t>(id.channel)};
  auto c = ctx_.conns.find(cid);
  if (!c) return false;  // shared memory or unknown: the peer is gone
  // A commit replaced the path since it failed: how a migration looks from here (pathFailed
  // ignores it).
  if (self && self != c->port->path()) return false;
  Job j{.id = cid,  // a move of the connection, when one is taken
        .reason = MigrateReason::kSocketError,
        .source = FaultSource::kSocketError,
        .fromRail = c->rail.load(),
        .faultNs = monotonicNs()};
  // Our own migration of this connection closes the old path under the peer, and the peer's
  // closes it under us: expected, not a fault, as long as the handshake in flight commits. When it
  // does not (its reply lost on a rail that failed at that moment), the port is left on a dead path
  // that nothing else notices (a closed socket is not a stalled one): a move of the connection
  // follows the handshake, and runs only if the port still has the failed path then.
  if (c->busy.load()) {
    j.ifPath = self ? self : c->port->path();
    ctx_.migration->enqueue(j);
    return true;
  }
  // The peer closed the connection (FIN/RST): its process died or its communicator failed. A
  // link fault never looks like this (nothing crosses a dead link). Except after a handshake that
  // one end gave up on (reply later than its deadline) while the other committed it: the committed
  // end closes the old path, the other closes the new one. Then migrate (a dead peer still fails
  // within RECCL_FAILOVER_TIMEOUT_MS) rather than fail the communicator. A path the peer has
  // sent on since is not one it gave up on: its close is the peer's, and taking it for a
  // handshake would hold every rank that waits on this one for the failover timeout.
  const channel::Path* closed = self ? self : c->port->path();
  bool abandonedHandshake = c->handshakeUnsure.load() ||
                            (c->port->epoch() > 1 && c->port->epoch() == c->passiveEpoch.load() &&
                             !(closed && closed->heard()));
  if (s.code() == Errc::kPeerFailure && !abandonedHandshake) {
    // Taken for a dead peer (PortBase::pathFailed still spares a path that was replaced while
    // this ran). The state it was judged by, for the log of a failed run:
    // the failed path names its epoch, the port's current path the one in force.
    // A peer's orderly teardown looks the same: its recclCommDestroy while this rank, done first
    // or last, holds its communicator idle, or is still in the last collective, waiting on other
    // peers, with every step it sent this peer acknowledged (the peer flushes its acks before it
    // closes). Said at INFO then, as nothing failed; a later call that needs the connection
    // fails with the close's error all the same.
    const bool nothingOwed =
        c->role == Role::kSender && [&] {
          auto* sp = static_cast<channel::SendPort*>(c->port);
          return sp->acked() >= sp->posted();
        }();
    channel::Path* cur = c->port->path();
    RECCL_LOG_AT_(ctx_.host.idle() || nothingOwed ? LogLevel::kInfo : LogLevel::kWarn, kLogFailover,
                  "rank %d: peer close on %s with no migration in progress here: port epoch %u (path %s), queued %d, "
                  "last epoch accepted from the peer %u, rail %d (%s)",
                  ctx_.cfg.rank, connName(cid).c_str(), c->port->epoch(), cur ? cur->describe().c_str() : "none",
                  c->jobs.busy() ? 1 : 0, c->passiveEpoch.load(), c->rail.load(), s.message().c_str());
    return false;
  }
  RECCL_WARN(kLogFailover, "rank %d: path rank %d->%d ch %u failed (%s); migrating", ctx_.cfg.rank, cid.sender,
             cid.receiver, cid.channel, s.message().c_str());
  ctx_.migration->enqueue(j);
  return true;
}

}  // namespace reccl::failover
