#include "failover/failover.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "core/comm.h"
#include "failover/rebalance.h"
#include "failover/source_choice.h"
#include "reccl/common/log.h"
#include "reccl/common/params.h"

namespace reccl::failover {
const char* faultSourceName(FaultSource s) noexcept {
  switch (s) {
    case FaultSource::kDetector: return "detector";
    case FaultSource::kPoll: return "nic-poll";
    case FaultSource::kSocketError: return "socket-error";
    case FaultSource::kStall: return "stall";
    case FaultSource::kPeer: return "peer";
    case FaultSource::kDaemon: return "daemon";
  }
  return "?";
}

Result<std::unique_ptr<Failover>> Failover::create(core::Comm& comm) {
  std::unique_ptr<Failover> f(new Failover(comm));
  RECCL_TRY(f->start());
  return f;
}

Status Failover::start() {
  rank_ = comm_.rank_;
  nrails_ = std::clamp(comm_.topo_.nrails, 1, kMaxRails);
  stallMs_ = std::max<int64_t>(1, params::StallTimeoutMs());
  timeoutMs_ = std::max<int64_t>(1, params::FailoverTimeoutMs());
  pollMs_ = std::clamp<int64_t>(params::FailoverPollMs(), 1, 1000);
  holdDownMs_ = std::max<int64_t>(0, params::HoldDownMs());
  std::string det = params::Detector();
  standbyOn_ = params::FailoverStandby() && nrails_ > 1;
  int64_t rt = params::FailoverRtPrio();
  if (rt < 0 || rt > 99)
    return Status(Errc::kInvalidArgument, "RECCL_FAILOVER_RT_PRIO=" + std::to_string(rt) + " is not 0 (off) or 1-99");
  rtPrio_ = static_cast<int>(rt);
  int64_t sliceUs = params::FailoverSliceUs();
  if (sliceUs != 0 && (sliceUs < 100 || sliceUs > 100000))
    return Status(Errc::kInvalidArgument,
                  "RECCL_FAILOVER_SLICE_US=" + std::to_string(sliceUs) + " is not 0 (kernel default) or 100-100000");
  sliceNs_ = static_cast<uint64_t>(sliceUs) * 1000;
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wakeFd_ < 0) return Status::FromErrno(errno, "failover: eventfd");
  sbWakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (sbWakeFd_ < 0) return Status::FromErrno(errno, "failover: eventfd");
  RECCL_TRY(startRelay());  // route policy + this rank's relay server (relay.cpp)

  uint64_t all = nrails_ >= 64 ? ~0ull : ((1ull << nrails_) - 1);
  railsUp_.store(all);
  nicUpSinceNs_.assign(nrails_, 1);
  nicDown_.assign(nrails_, false);
  peerRailsUp_.assign(comm_.nranks_, all);
  ifSock_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (ifSock_ < 0) return Status::FromErrno(errno, "failover: socket for NIC state");
  // Fault sources: the link detector when it runs here, else the NIC poll; in-band always.
  bool realNics = false;
  for (int r = 0; r < nrails_ && static_cast<size_t>(r) < comm_.myNics_.size(); ++r)
    realNics |= comm_.myNics_[r].name != "lo";
  // The detector loads BPF programs (tens to hundreds of ms): the monitor thread starts it, so
  // communicator set-up does not wait; until it runs, the NIC poll stands in.
  RECCL_TRY(planSources(det, realNics).status());  // refuse an unknown RECCL_DETECTOR here, at init
  pollNics_ = det != "none" && realNics;
  detectorName_ = pollNics_ ? "nic-poll" : "none";

  comm_.env_.onPathFailure = [this](const channel::PortId& id, bool isSender, const Status& s) {
    return onPathFailure(id, isSender, s);
  };
  monitor_ = std::thread([this] { monitorLoop(); });
  {
    // Two migrator threads wait from the start: a fault's jobs (one per connection on the rail,
    // usually 2+) start at once instead of after a thread creation each.
    std::lock_guard lk(poolMu_);
    startMigrator();
    startMigrator();
  }
  watcher_ = std::thread([this] { standbyWatcherLoop(); });
  RECCL_INFO(kLogFailover,
             "rank %d: failover on: %d rails, sources %s+socket-error+stall(%lld ms), timeout %lld ms, route %s%s, "
             "standby %s, rt prio %d, slice %llu us",
             rank_, nrails_, detectorName_.c_str(), static_cast<long long>(stallMs_),
             static_cast<long long>(timeoutMs_), route_.c_str(), nicAffinity_ ? " (nic affinity)" : "",
             standbyOn_ ? "on" : "off", rtPrio_, static_cast<unsigned long long>(sliceNs_ / 1000));
  return Status::Ok();
}

void Failover::stop() {
  if (stop_.exchange(true)) return;
  stopRelay();
  comm_.env_.onPathFailure = nullptr;
  {
    std::lock_guard lk(qMu_);
  }
  qCv_.notify_all();
  monCv_.notify_all();
  for (int fd : {wakeFd_, sbWakeFd_}) {
    if (fd < 0) continue;
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(fd, &one, sizeof(one));
  }
  if (monitor_.joinable()) monitor_.join();
  if (watcher_.joinable()) watcher_.join();
  std::vector<std::thread> pool;
  {
    std::lock_guard lk(poolMu_);  // no migrator starts another once stop_ is set (startMigrator)
    pool.swap(pool_);
  }
  for (auto& t : pool) t.join();
  {
    std::lock_guard lk(psMu_);
    passiveStandbys_.clear();
  }
  for (auto& c : snapshot()) {
    std::lock_guard lk(c->sbMu);
    c->standby.reset();
  }
  stopSources();
  stopDetector();
  if (ifSock_ >= 0) close(ifSock_);
  ifSock_ = -1;
  if (wakeFd_ >= 0) close(wakeFd_);
  wakeFd_ = -1;
  if (sbWakeFd_ >= 0) close(sbWakeFd_);
  sbWakeFd_ = -1;
}

bool Failover::broken() const { return comm_.broken_.load(); }

std::shared_ptr<Failover::Conn> Failover::find(const ConnId& id) {
  {
    std::lock_guard lk(connsMu_);
    if (auto it = conns_.find(id); it != conns_.end()) return it->second;
  }
  refreshConns();
  std::lock_guard lk(connsMu_);
  if (auto it = conns_.find(id); it != conns_.end()) return it->second;
  return nullptr;
}

std::vector<std::shared_ptr<Failover::Conn>> Failover::snapshot() {
  std::lock_guard lk(connsMu_);
  std::vector<std::shared_ptr<Conn>> out;
  out.reserve(conns_.size());
  for (auto& [k, c] : conns_) out.push_back(c);
  return out;
}

uint64_t Failover::peerRails(int peer) {
  std::lock_guard lk(peerMu_);
  return peer >= 0 && static_cast<size_t>(peer) < peerRailsUp_.size() ? peerRailsUp_[peer] : 0;
}

void Failover::setPeerRails(int peer, uint64_t mask) {
  uint64_t gained = 0;
  uint64_t now = monotonicNs();
  {
    std::lock_guard lk(peerMu_);
    if (peer >= 0 && static_cast<size_t>(peer) < peerRailsUp_.size()) {
      gained = mask & ~peerRailsUp_[peer];
      peerRailsUp_[peer] = mask;
    }
    // A rail the peer reports up again was down there until now: its fault ends now, not at the
    // last report that said down (the sockets that backed off meanwhile retransmit once it is
    // back).
    for (int r = 0; r < nrails_; ++r)
      if (!((mask >> r) & 1u) || ((gained >> r) & 1u)) peerRailDownNs_[r].store(now, std::memory_order_release);
  }
  // A rail back at the peer and up here: a healthy route for what stayed on a gray rail.
  if (gained & railsUp_.load()) moveOffGrayRails(peer, FaultSource::kPeer, now);
}

std::vector<double> Failover::railWeights(int peer) {
  // Weights from the measured throughput of each rail (rail_meter.cpp); a rail must be up here
  // and, as far as this rank knows, at the peer.
  uint64_t both = railsUp_.load() & peerRails(peer);
  return weightsFromThroughput(measuredBps(), both);
}

std::vector<int> Failover::railLoads(std::optional<Role> role) {
  std::vector<int> load(nrails_, 0);
  for (auto& c : snapshot()) {
    int r = c->rail.load();
    if ((!role || c->role == *role) && r >= 0 && r < nrails_) ++load[r];
  }
  return load;
}

int Failover::railForNewConnection(int peer, int preferred) {
  auto w = railWeights(peer);
  if (preferred >= 0 && preferred < nrails_ && w[preferred] > 0) return preferred;
  int r = pickRail(railLoads(), w, -1);
  return r >= 0 ? r : preferred;  // nothing healthy: connecting fails and reports it
}

void Failover::fillStats(core::CommStats* s) const {
  s->failovers = failovers_.load();
  s->failbacks = failbacks_.load();
  s->bytesResent = bytesResent_.load();
  s->lastFailoverUs = lastFailoverUs_.load();
  s->lastFailoverSignalNs = lastFailoverSignalNs_.load();
  s->railsUp = static_cast<uint32_t>(std::popcount(railsUp_.load()));
  s->relayMigrations = relayMigrations_.load();
  s->relayBytesForwarded = relay_ ? relay_->bytesForwarded() : 0;
  s->relayPipesServed = relay_ ? relay_->pipesServed() : 0;
  s->standbyFailovers = standbyFailovers_.load();
  fillSourceStats(s);
}

core::Hello Failover::dataHello(int dstRank, uint32_t channel, uint32_t epoch) const {
  core::Hello h;
  h.kind = core::HelloKind::kTcpData;
  h.commId = comm_.commId_;
  h.srcRank = rank_;
  h.dstRank = dstRank;
  h.nranks = comm_.nranks_;
  h.channel = channel;
  h.epoch = epoch;
  return h;
}

Status Failover::onMigrationHello(UniqueFd fd, const core::Hello& h) {
  if (stop_.load()) return Status(Errc::kAborted, "failover stopped");
  {
    std::lock_guard lk(qMu_);
    passive_.push_back(Passive{std::move(fd), h, monotonicNs()});
  }
  qCv_.notify_one();
  return Status::Ok();
}

void Failover::enqueue(Job j) {
  auto c = find(j.id);
  if (!c) return;
  if (c->queued.exchange(true)) return;  // one job per connection at a time
  j.queuedNs = monotonicNs();
  {
    std::lock_guard lk(qMu_);
    jobs_.push_back(j);
  }
  qCv_.notify_one();
}

}  // namespace reccl::failover
