// The monitor thread: fault sources -> rail state -> migration jobs.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include "core/comm.h"
#include "failover/failover.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"
#include "transport/socket_paths.h"

#include "failover/detector_link.h"

namespace reccl::failover {
namespace {

int pathFd(channel::Path* p) {
  if (auto* s = dynamic_cast<transport::SocketSendPath*>(p)) return s->fd();
  if (auto* r = dynamic_cast<transport::SocketRecvPath*>(p)) return r->fd();
  return -1;
}

}  // namespace

bool Failover::refreshConns() {
  // Ports are only ever added (the maps are emptied when the communicator goes, after failover
  // stopped), so their sizes are a generation: unchanged since the last full walk, nothing is new
  // and nothing is walked. This runs at every monitor wake-up and on every unknown connection.
  size_t ports = 0;
  bool whole = true;
  {
    std::unique_lock sl(comm_.sendMu_, std::try_to_lock);
    if (sl.owns_lock()) ports += comm_.sends_.size(); else whole = false;
  }
  {
    std::unique_lock rl(comm_.recvMu_, std::try_to_lock);
    if (rl.owns_lock()) ports += comm_.recvs_.size(); else whole = false;
  }
  if (whole && ports == portsSeen_.load(std::memory_order_acquire)) return false;
  struct Found {
    ConnId id;
    Role role;
    int peer;
    channel::PortBase* port;
  };
  std::vector<Found> found;
  // Never wait for the port maps: a lazy connect holds them while it connects.
  whole = true;
  {
    std::unique_lock sl(comm_.sendMu_, std::try_to_lock);
    if (sl.owns_lock())
      for (auto& [k, p] : comm_.sends_)
        found.push_back({ConnId{rank_, k.first, static_cast<uint32_t>(k.second)}, Role::kSender, k.first, p.get()});
    else
      whole = false;
  }
  {
    std::unique_lock rl(comm_.recvMu_, std::try_to_lock);
    if (rl.owns_lock())
      for (auto& [k, p] : comm_.recvs_)
        found.push_back({ConnId{k.first, rank_, static_cast<uint32_t>(k.second)}, Role::kReceiver, k.first, p.get()});
    else
      whole = false;
  }
  bool added = false;
  std::lock_guard lk(connsMu_);
  for (auto& f : found) {
    if (conns_.count(f.id)) continue;
    int fd = pathFd(f.port->path());
    if (fd < 0) continue;  // shared memory: a NIC fault does not touch it
    auto c = std::make_shared<Conn>();
    c->id = f.id;
    c->role = f.role;
    c->peer = f.peer;
    c->port = f.port;
    c->preferredRail = core::railFor(comm_.topo_, f.id.sender, static_cast<int>(f.id.channel));
    int rail = c->preferredRail;
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      for (size_t r = 0; r < comm_.myNics_.size() && static_cast<int>(r) < nrails_; ++r)
        if (comm_.myNics_[r].addr == sa.sin_addr.s_addr) rail = static_cast<int>(r);
    }
    c->rail = rail;
    c->fd = fd;
    c->highest = f.port->epoch();
    armSocket(fd);
    conns_.emplace(f.id, std::move(c));
    added = true;
  }
  // Every port seen (shared-memory ones are never tracked): the next wake-ups skip the walk.
  if (whole) portsSeen_.store(found.size(), std::memory_order_release);
  if (added) {
    // Found on another thread (a path failure, a migration hello, a job): the monitor's stall
    // check and standby upkeep start on the new connections now, not at its next deadline.
    connsAdded_.store(true, std::memory_order_release);
    if (std::this_thread::get_id() != monitorId_.load(std::memory_order_acquire)) wakeMonitor();
  }
  return added;
}

void Failover::wakeMonitor() noexcept {
  if (stop_.load() || wakeFd_ < 0) return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = write(wakeFd_, &one, sizeof(one));
}

void Failover::armSocket(int fd) const {
  int one = 1, idle = static_cast<int>(std::max<int64_t>(1, stallMs_ / 1000)), intvl = 1, cnt = 1000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

#ifdef RECCL_HAVE_DETECTOR

int Failover::detectorFd() const { return det_ && det_->det ? det_->det->eventFd() : -1; }

void Failover::stopDetector() noexcept {
  if (det_ && det_->det) det_->det->stop();
  det_.reset();
}

void Failover::drainDetector() {
  if (!det_) return;
  for (const auto& e : det_->det->drain()) {
    auto it = det_->railOf.find(e.ifname);
    if (it == det_->railOf.end()) continue;
    switch (e.type) {
      case detector::LinkEventType::kLinkDown:
      case detector::LinkEventType::kLinkDegraded:  // a gray failure is routed around like a dead link
        lastDetectorSource_ = detector::sourceName(e.source);
        railDown(it->second, FaultSource::kDetector, e.signalNs,
                 e.type == detector::LinkEventType::kLinkDegraded ? MigrateReason::kDegraded : MigrateReason::kLinkDown,
                 e.emitNs);
        break;
      case detector::LinkEventType::kLinkUp:  // after the detector's hold-down and flap damping
        railBackUp(it->second, e.emitNs, FaultSource::kDetector);
        break;
    }
  }
}
#else
int Failover::detectorFd() const { return -1; }
void Failover::stopDetector() noexcept {}
void Failover::drainDetector() {}
#endif

// Here, where DetectorLink is complete.
Failover::Failover(core::Comm& comm) : comm_(comm) {}
Failover::~Failover() { stop(); }

// The monitor sleeps in poll() on its descriptors (stop, the in-process detector's events, the
// daemon's socket) until the earliest deadline of its periodic work, which is only what a source
// needs: the NIC poll every RECCL_FAILOVER_POLL_MS while that poll is the fault source (or hands
// rails back), the stall check every RECCL_STALL_TIMEOUT_MS / 20, the rail meter every 100 ms,
// standby upkeep (fast while standbys are being made, a liveness look otherwise), held DEGRADED
// signals, the daemon's liveness ping and link-state look. A detector event wakes poll at once:
// nothing on the fault's path waits for a tick. An idle communicator with a detector wakes about
// ten times a second (it was 200 at a fixed 5 ms tick, each one walking the port maps).
namespace {
constexpr uint64_t kNever = UINT64_MAX;
constexpr uint64_t kMsNs = 1'000'000ull;
// Work due this close to a wake-up runs in it (poll's timeout is in whole milliseconds).
constexpr uint64_t kCoalesceNs = 2 * kMsNs;
constexpr uint64_t kGrayTickNs = 50 * kMsNs;  // a held DEGRADED is re-judged this often
constexpr uint64_t kMaxSleepNs = 1000 * kMsNs;
}  // namespace

uint64_t Failover::stallScanPeriodNs() const {
  // A path is declared stalled after stallMs_ without an ACK: a look every 1/20 of that adds at
  // most 5 % to the in-band detection time.
  return std::clamp<uint64_t>(static_cast<uint64_t>(stallMs_) * kMsNs / 20, 5 * kMsNs, 100 * kMsNs);
}

void Failover::monitorLoop() {
  // The node daemon, the in-process detector or the NIC poll, as RECCL_DETECTOR asks and the
  // host allows (fault_sources.cpp); tickSources keeps that choice alive (fallback, reconnect).
  applyThreadSched("monitor", "reccl-monitor");
  monitorId_.store(std::this_thread::get_id(), std::memory_order_release);
  startSources();
  const uint64_t scanPeriod = stallScanPeriodNs();
  uint64_t nextPoll = 0, nextScan = 0, nextSources = 0;
  // Soft deadlines fall on the stall check's ticks, so that an idle monitor wakes once for all.
  auto onScanTick = [&](uint64_t due) {
    if (nextScan == kNever || due <= nextScan) return due;
    return nextScan + (due - nextScan + scanPeriod - 1) / scanPeriod * scanPeriod;
  };
  while (!stop_.load()) {
    if (broken()) {
      // The communicator failed: nothing left to watch or move; wait for stop.
      pollfd pf{wakeFd_, POLLIN, 0};
      ::poll(&pf, 1, static_cast<int>(kMaxSleepNs / kMsNs));
      continue;
    }
    uint64_t now = monotonicNs();
    bool tracked = haveConns();
    if (!tracked) nextScan = kNever;
    else if (nextScan == kNever) nextScan = now;
    uint64_t due = std::min(nextSources, now + kMaxSleepNs);
    // Connections are made lazily by the first collective on them, and nothing tells the monitor:
    // it looks for new ones (two try_locks and two sizes when there are none) at the stall
    // check's period, so their stall check and standbys start within that, as the fixed tick did
    // within its 5 ms. Once some are tracked the stall check's own ticks do it.
    if (!tracked) due = std::min(due, now + scanPeriod);
    if (pollNics_) due = std::min(due, nextPoll);
    if (tracked) due = std::min({due, nextScan, onScanTick(meterDueNs())});
    if (standbyOn_ && tracked) due = std::min(due, standbyDueNs_ == 0 ? now : onScanTick(standbyDueNs_));
    if (grayHeld()) due = std::min(due, now + kGrayTickNs);
    int timeoutMs = due <= now ? 0 : static_cast<int>((due - now + kMsNs - 1) / kMsNs);
    pollfd pf[3] = {{wakeFd_, POLLIN, 0}, {detectorFd(), POLLIN, 0}, {daemonFd(), POLLIN, 0}};
    int rc = ::poll(pf, 3, timeoutMs);  // fd -1 entries are ignored
    if (stop_.load()) break;
    if (broken()) continue;
    if (rc > 0 && (pf[0].revents & POLLIN)) {
      uint64_t v;
      [[maybe_unused]] auto n = read(wakeFd_, &v, sizeof(v));
    }
    // Connections made since the last wake-up first, so that a fault event covers them; new ones
    // (found here or on another thread) get their standbys at once.
    refreshConns();
    if (connsAdded_.exchange(false, std::memory_order_acq_rel)) standbyDueNs_ = 0;
    if (rc > 0 && (pf[1].revents & POLLIN)) drainDetector();
    now = monotonicNs();
    const uint64_t soon = now + kCoalesceNs;
    tickSources(now, rc > 0 ? pf[2].revents : 0);
    nextSources = sourcesDueNs(now);
    if (pollNics_ && nextPoll <= soon) {
      pollNics(now);
      nextPoll = now + static_cast<uint64_t>(pollMs_) * kMsNs;
    }
    if (nextScan <= soon) {
      scanStalls(now);
      nextScan = now + scanPeriod;
    }
    tendGray(now);
    meterRails(now);  // rail weights from measured throughput (rail_meter.cpp); cheap until due
    if (standbyOn_ && standbyDueNs_ <= soon) standbyDueNs_ = tendStandbys(now);  // standby.cpp
  }
}

bool Failover::haveConns() {
  std::lock_guard lk(connsMu_);
  return !conns_.empty();
}

bool Failover::grayHeld() const {
  return std::any_of(grayHold_.begin(), grayHold_.end(), [](const GrayHold& h) { return h.sinceNs != 0; });
}

void Failover::pollNics(uint64_t nowNs) {
  for (int r = 0; r < nrails_ && static_cast<size_t>(r) < comm_.myNics_.size(); ++r) {
    const auto& nic = comm_.myNics_[r];
    if (nic.name == "lo" || (!pollNics_ && !nicDown_[r])) continue;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, nic.name.c_str(), IFNAMSIZ - 1);
    bool up = false;
    if (ioctl(ifSock_, SIOCGIFFLAGS, &ifr) == 0) up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    if (!up) {
      nicUpSinceNs_[r] = 0;
      if (!nicDown_[r]) {
        nicDown_[r] = true;
        railDown(r, FaultSource::kPoll, nowNs);
      }
      continue;
    }
    if (!nicDown_[r]) continue;
    // Hold-down: the NIC must stay up this long before traffic goes back to it.
    if (nicUpSinceNs_[r] == 0) nicUpSinceNs_[r] = nowNs;
    if (nowNs - nicUpSinceNs_[r] >= static_cast<uint64_t>(holdDownMs_) * 1000000ull) {
      nicDown_[r] = false;
      railBackUp(r, nowNs);
    }
  }
}

void Failover::scanStalls(uint64_t nowNs) {
  for (auto& c : snapshot()) {
    if (c->busy.load() || c->queued.load() || c->port->failed()) continue;
    int fd = c->fd.load();
    if (fd < 0) continue;
    tcp_info ti{};
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;
    if (ti.tcpi_state != TCP_ESTABLISHED) continue;
    // Data or keepalive probes outstanding and no ACK for the stall time: the path is dead,
    // whichever end of it failed. (A slow peer still ACKs at the TCP level.) The last ACK of a
    // connection that was idle is old before anything is lost: data counts only once a
    // retransmission timeout fired unanswered, a keepalive probe only once it has waited the
    // stall time (it goes out after the keepalive idle time, see armSocket). Without this an
    // idle connection that had just sent (or probed) looked stalled and was migrated, or
    // failed when no other rail was left.
    const uint32_t stall = static_cast<uint32_t>(stallMs_);
    const uint32_t keepIdleMs = static_cast<uint32_t>(std::max<int64_t>(1, stallMs_ / 1000) * 1000);
    bool dataStalled = ti.tcpi_unacked > 0 && ti.tcpi_last_ack_recv >= stall &&
                       (ti.tcpi_backoff > 0 || ti.tcpi_retransmits > 0);
    bool probeStalled = ti.tcpi_probes > 0 && ti.tcpi_last_ack_recv >= keepIdleMs + stall;
    if (dataStalled || probeStalled) {
      Job j;
      j.id = c->id;
      j.reason = MigrateReason::kStall;
      j.source = FaultSource::kStall;
      j.fromRail = c->rail.load();
      j.faultNs = nowNs - static_cast<uint64_t>(ti.tcpi_last_ack_recv) * 1000000ull;
      RECCL_WARN(kLogFailover, "rank %d: no tcp ack for %u ms on rank %d->%d ch %u (rail %d): path stalled", rank_,
                 ti.tcpi_last_ack_recv, c->id.sender, c->id.receiver, c->id.channel, j.fromRail);
      enqueue(j);
    }
  }
}

// A DEGRADED from the retransmit detector says "segments on this device go unacknowledged". A hard
// fault at the far end of the rail (the peer's cable pulled) says the same while it lasts and a
// little after (backed-off retransmissions, FINs of the sockets migration closed), so a DEGRADED
// then carries no news: the peer has told us the rail is down at its end (every migration request
// and reply carries its railsUp), and nothing of ours to it uses the rail. Acting on it took the
// rail out here for the whole degraded clear time (RECCL_DEGRADED_CLEAR_MS, 5 s), and the next
// fault, on the other rail, found no rail left. The rule: retransmits count as a gray failure only
// while the rail is believed healthy at both ends. A DEGRADED on rail r is held, not acted on,
// while any peer reports r down and for two retransmit windows (RECCL_RETRANS_WINDOW_MS) after the
// first report that has it up again (a fail-back's request or reply), the retransmits counted
// before and just after the far end came back (the same after this end's own hard fault on r: the
// sockets that backed off resume once the link is back). Likewise for two windows after a
// fail-back or rebalance moved connections off r while r was healthy at both ends: the sockets it
// retired close with data in flight (seen: a rail that had carried everything through a fault,
// DEGRADED 350 ms after the fail-back moved its connections home). Held, not
// dropped: the detector keeps a rail degraded while retransmits go on and clears it the clear
// time after the last one; still degraded that long after the explanation ended means the
// retransmits went on with both ends healthy, a real gray failure, routed around then (late by
// the clear time). A held DEGRADED that clears costs the rail nothing: no migration, no hold-down.
// Cost: with more than two hosts, a real gray failure on r that starts while another peer's r is
// down is seen only once that fault is over.
// The rule sits here, not in the detector: only the communicator knows what its peers reported,
// and it covers the in-process detector and the node daemon alike.
bool Failover::grayExplained(int rail, uint64_t nowNs) {
  uint64_t windowNs = static_cast<uint64_t>(std::max<int64_t>(1, params::RetransWindowMs())) * 2'000'000ull;
  uint64_t last = peerRailDownNs_[rail].load(std::memory_order_acquire);
  if (last != 0 && nowNs - last < windowNs) return true;
  uint64_t left = railLeftNs_[rail].load(std::memory_order_acquire);
  if (left != 0 && nowNs - left < windowNs) return true;
  // The same for this end's own fault: the detector ignores retransmits while the link is down,
  // not those of the backed-off sockets that resume once it is back.
  if (static_cast<size_t>(rail) < grayHold_.size() && grayHold_[rail].upNs != 0 &&
      nowNs - grayHold_[rail].upNs < windowNs)
    return true;
  std::lock_guard lk(peerMu_);
  for (size_t p = 0; p < peerRailsUp_.size(); ++p)
    if (static_cast<int>(p) != rank_ && !((peerRailsUp_[p] >> rail) & 1u)) return true;
  return false;
}

void Failover::tendGray(uint64_t nowNs) {
  if (grayHold_.empty()) return;
  const uint64_t clearNs = static_cast<uint64_t>(std::max<int64_t>(0, params::DegradedClearMs())) * 1'000'000ull;
  for (int r = 0; r < static_cast<int>(grayHold_.size()); ++r) {
    auto& h = grayHold_[r];
    if (h.sinceNs == 0) continue;
    if (grayExplained(r, nowNs)) {
      h.explainedNs = nowNs;
      continue;
    }
    // The detector's clear (and its LinkUp, which ends the hold) is due by explainedNs + clear.
    if (nowNs - h.explainedNs < clearNs + 250'000'000ull) continue;
    RECCL_WARN(kLogFailover, "rank %d: rail %d (%s) still degraded %llu ms after the known fault ended: gray failure",
               rank_, r, comm_.myNics_[r].name.c_str(),
               static_cast<unsigned long long>((nowNs - h.explainedNs) / 1'000'000ull));
    FaultSource src = h.src;
    h.sinceNs = 0;
    railDown(r, src, nowNs, MigrateReason::kDegraded);
  }
}

void Failover::railDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason, uint64_t emitNs) {
  const uint64_t seenNs = emitNs ? monotonicNs() : 0;
  uint64_t bit = 1ull << rail;
  if (reason == MigrateReason::kDegraded && (railsUp_.load() & bit)) {
    uint64_t now = monotonicNs();
    if (grayHold_.size() != static_cast<size_t>(nrails_)) grayHold_.assign(nrails_, GrayHold{});
    if (grayExplained(rail, now)) {
      auto& h = grayHold_[rail];
      if (h.sinceNs == 0) {
        h.sinceNs = now;
        h.explainedNs = now;
        h.src = src;
      }
      auto ago = [now](uint64_t t) { return t ? static_cast<long long>((now - t) / 1'000'000ull) : -1ll; };
      RECCL_INFO(kLogFailover,
                 "rank %d: rail %d (%s) degraded signal held: retransmits of a known fault or move (ms ago, -1 never: "
                 "a peer last reported the rail down or back up %lld, back up here %lld, connections moved off it %lld)",
                 rank_, rail, comm_.myNics_[rail].name.c_str(), ago(peerRailDownNs_[rail].load()),
                 ago(grayHold_[rail].upNs), ago(railLeftNs_[rail].load()));
      return;
    }
  }
  if (grayHold_.size() != static_cast<size_t>(nrails_)) grayHold_.assign(nrails_, GrayHold{});
  grayHold_[rail].sinceNs = 0;
  const bool hard = reason != MigrateReason::kDegraded;
  if (!(railsUp_.fetch_and(~bit) & bit)) {
    // Already out. A hard fault on a DEGRADED rail still counts: connections that stayed on it
    // (no healthy rail to move to then) must move now, not wait for the in-band stall check.
    if (!hard || grayHold_[rail].hardDown) return;
  }
  grayHold_[rail].hardDown = hard;
  railEpoch_[rail].fetch_add(1, std::memory_order_acq_rel);
  refreshConns();  // a connection made since the last wake-up moves too (no walk when none was)
  // The jobs first: the log line and the relay's bookkeeping are not on the fault's path.
  for (auto& c : snapshot()) {
    // A relayed connection does not use this rank's NIC (its relay reports its own faults).
    if (c->rail.load() != rail || c->relayVia.load() >= 0) continue;
    Job j;
    j.id = c->id;
    j.reason = reason;
    j.source = src;
    j.fromRail = rail;
    j.faultNs = signalNs;
    j.emitNs = emitNs;
    j.seenNs = seenNs;
    enqueue(j);
  }
  const bool named = src == FaultSource::kDetector || src == FaultSource::kDaemon;
  RECCL_WARN(kLogFailover, "rank %d: rail %d (%s) %s (source %s%s%s)", rank_, rail, comm_.myNics_[rail].name.c_str(),
             reason == MigrateReason::kDegraded ? "degraded" : "down", faultSourceName(src), named ? " " : "",
             named ? lastDetectorSource_.c_str() : "");
  relayRailDown(rail);  // pipes this rank forwards over the rail break; their origins move them
  dropStandbys(rail);   // standby paths on the rail are as dead as the rail
  standbyDueNs_ = 0;    // and the upkeep replaces them (and those the migrations take) soon
}

void Failover::railBackUp(int rail, uint64_t signalNs, FaultSource src) {
  uint64_t bit = 1ull << rail;
  // Also the detector's clear of a held DEGRADED: the retransmits stopped, nothing to do.
  if (static_cast<size_t>(rail) < grayHold_.size()) grayHold_[rail].sinceNs = 0;
  if (railsUp_.fetch_or(bit) & bit) return;
  if (grayHold_.size() != static_cast<size_t>(nrails_)) grayHold_.assign(nrails_, GrayHold{});
  if (grayHold_[rail].hardDown) grayHold_[rail].upNs = monotonicNs();
  grayHold_[rail].hardDown = false;
  railEpoch_[rail].fetch_add(1, std::memory_order_acq_rel);
  RECCL_INFO(kLogFailover, "rank %d: rail %d (%s) up again after hold-down; failing back (source %s)", rank_, rail,
             comm_.myNics_[rail].name.c_str(), faultSourceName(src));
  standbyDueNs_ = 0;  // standbys on the rail that is back, and for the connections that leave it
  // Fail-back first: a connection that prefers this rail goes back to it even when it sits on a
  // gray rail. One job per connection (enqueue), so moved by weight first it stayed off its rail.
  for (auto& c : snapshot()) {
    if (c->preferredRail != rail || c->rail.load() == rail) continue;
    Job j;
    j.id = c->id;
    j.reason = MigrateReason::kFailBack;
    j.source = src;
    j.fromRail = c->rail.load();
    j.toRail = rail;
    j.faultNs = signalNs;
    enqueue(j);
  }
  moveOffGrayRails(-1, src, signalNs);  // the rest of what stayed on a gray rail: by weight
}

// Connections that stayed on a DEGRADED rail for want of a healthy one (runJob) move as soon as
// one appears: a rail up again here (railBackUp) or at the peer (setPeerRails). peer -1: all.
void Failover::moveOffGrayRails(int peer, FaultSource src, uint64_t signalNs) {
  const uint64_t up = railsUp_.load();
  for (auto& c : snapshot()) {
    const int cur = c->rail.load();
    if (peer >= 0 && c->peer != peer) continue;
    if (cur < 0 || cur >= nrails_ || ((up >> cur) & 1u) || c->relayVia.load() >= 0) continue;
    Job j;
    j.id = c->id;
    j.reason = MigrateReason::kDegraded;
    j.source = src;
    j.fromRail = cur;
    j.faultNs = signalNs;
    enqueue(j);
  }
}

bool Failover::onPathFailure(const channel::PortId& id, bool isSender, const Status& s) {
  // Runs on the progress thread: decide and queue, never block.
  if (stop_.load() || broken()) return false;
  ConnId cid = isSender ? ConnId{id.self, id.peer, static_cast<uint32_t>(id.channel)}
                        : ConnId{id.peer, id.self, static_cast<uint32_t>(id.channel)};
  auto c = find(cid);
  if (!c) return false;  // shared memory or unknown: the peer is gone
  // Our own migration of this connection closes the old socket under the peer, and the peer's
  // closes it under us: expected, not a fault.
  if (c->busy.load()) return true;
  // The peer closed the connection (FIN/RST): its process died or its communicator failed. A
  // link fault never looks like this (nothing crosses a dead link). Except after a handshake that
  // one end gave up on (reply later than its deadline) while the other committed it: the committed
  // end closes the old path, the other closes the new one. Then migrate (a dead peer still fails
  // within RECCL_FAILOVER_TIMEOUT_MS) rather than fail the communicator.
  bool abandonedHandshake = c->handshakeUnsure.load() ||
                            (c->port->epoch() > 1 && c->port->epoch() == c->passiveEpoch.load());
  if (s.code() == Errc::kPeerFailure && !abandonedHandshake) {
    // Taken for a dead peer (PortBase::pathFailed still spares a path that was replaced while
    // this ran). The state it was judged by, for the log of a failed run:
    // the failed path names its epoch, the port's current path the one in force.
    channel::Path* cur = c->port->path();
    RECCL_WARN(kLogFailover,
               "rank %d: peer close on %s with no migration in progress here: port epoch %u (path %s), queued %d, "
               "last epoch accepted from the peer %u, rail %d (%s)",
               rank_, connName(cid).c_str(), c->port->epoch(), cur ? cur->describe().c_str() : "none",
               c->queued.load() ? 1 : 0, c->passiveEpoch.load(), c->rail.load(), s.message().c_str());
    return false;
  }
  Job j;
  j.id = cid;
  j.reason = MigrateReason::kSocketError;
  j.source = FaultSource::kSocketError;
  j.fromRail = c->rail.load();
  j.faultNs = monotonicNs();
  RECCL_WARN(kLogFailover, "rank %d: path rank %d->%d ch %u failed (%s); migrating", rank_, cid.sender,
             cid.receiver, cid.channel, s.message().c_str());
  enqueue(j);
  return true;
}

}  // namespace reccl::failover
