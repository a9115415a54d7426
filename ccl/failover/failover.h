// Failover for one communicator: a monitor thread that learns of path faults (local NIC state,
// socket errors reported by the transports, TCP connections without progress) and moves every
// TCP connection on a failed rail to a healthy one without the algorithms noticing.
//
// Monitor (monitor.cpp): rail health as an atomic bit mask + per-rail epochs (one load for the
// data path); sources: the link detector (the node daemon reccl-detectord, or in process;
// chosen and kept alive in fault_sources.cpp), else the local NICs' IFF_UP|IFF_RUNNING polled
// every RECCL_FAILOVER_POLL_MS (an ioctl, no privileges), path failures from the transports
// (PortEnv::onPathFailure), and TCP_INFO on every data socket, looked at every
// RECCL_STALL_TIMEOUT_MS / 20: unacknowledged data or keepalive probes with no ACK for
// RECCL_STALL_TIMEOUT_MS mean a dead path even when the fault is at the far end. The monitor
// sleeps on its event descriptors until the earliest of these deadlines (monitorLoop).
//
// Migration (migrate.cpp): the end that sees the fault takes the connection's pre-connected
// standby path on another rail (standby.cpp, RECCL_FAILOVER_STANDBY) or opens a new TCP path on
// another rail to the peer's NIC on that rail with the usual data hello (secret, communicator,
// ranks) carrying a migration epoch; it sends a MigrateRequest (migrate_wire.h), the other end
// switches its port to the new path and replies; the sender resends from the receiver's received step + 1 out of its
// slots, the receiver drops duplicates by step and stale frames by epoch. Both directions of a
// peer pair move (each connection is migrated by whichever end detects first; the larger epoch
// wins when both do). No rail to the peer within RECCL_FAILOVER_TIMEOUT_MS of the fault: the
// communicator fails with a network error.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "channel/port.h"
#include "core/handshake.h"
#include "core/wire.h"
#include "failover/migrate_wire.h"
#include "failover/relay_paths.h"
#include "failover/relay_server.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::core {
class Comm;
struct CommStats;
}  // namespace reccl::core

namespace reccl::failover {

inline constexpr int kMaxRails = 64;

// Where a fault was first seen.
enum class FaultSource : uint8_t { kDetector, kPoll, kSocketError, kStall, kPeer, kDaemon };
const char* faultSourceName(FaultSource s) noexcept;

class Failover {
 public:
  static Result<std::unique_ptr<Failover>> create(core::Comm& comm);
  ~Failover();
  Failover(const Failover&) = delete;
  Failover& operator=(const Failover&) = delete;

  // The data listener's test: a data hello carrying a migration epoch (> 1).
  static bool isMigrationHello(const core::Hello& h) noexcept {
    return h.kind == core::HelloKind::kTcpData && h.epoch > 1;
  }
  // Takes over a connection whose hello isMigrationHello (handled on a migrator thread).
  Status onMigrationHello(UniqueFd fd, const core::Hello& h);
  // The rail a new connection to `peer` should use: `preferred` while healthy on both ends.
  int railForNewConnection(int peer, int preferred);
  void fillStats(core::CommStats* s) const;

  // Data-path view of rail health: one load each.
  bool railUp(int rail) const noexcept {
    return rail >= 0 && rail < kMaxRails && (railsUp_.load(std::memory_order_acquire) >> rail) & 1u;
  }
  uint64_t railEpoch(int rail) const noexcept {
    return rail >= 0 && rail < kMaxRails ? railEpoch_[rail].load(std::memory_order_acquire) : 0;
  }

 private:
  // The data hello this rank sends on a new TCP connection to `dstRank` (job secret,
  // communicator, ranks, channel; epoch > 1 marks a migration).
  core::Hello dataHello(int dstRank, uint32_t channel, uint32_t epoch) const;
  // One directed TCP connection as failover tracks it (either end).
  struct Conn {
    ConnId id;
    Role role = Role::kSender;  // this rank's end
    int peer = -1;
    channel::PortBase* port = nullptr;
    int preferredRail = 0;
    std::atomic<int> rail{0};
    std::atomic<int> fd{-1};        // current socket, for TCP_INFO (-1 while relayed)
    std::atomic<int> relayVia{-1};  // the same-host rank forwarding it (relay.cpp), -1: direct
    std::atomic<int> busy{0};       // a migration of this connection is in progress here
    std::atomic<bool> queued{false};
    std::mutex mu;                  // serializes commits (initiated and passive)
    uint32_t highest = 1;           // largest epoch used, proposed or seen (under mu)
    uint32_t pending = 0;           // own proposal in flight (under mu)
    // Epoch of the last path this end accepted from the peer's proposal: if the peer gave up on
    // that handshake (its reply deadline passed) it closes the socket under us (see onPathFailure).
    std::atomic<uint32_t> passiveEpoch{0};
    // A handshake of ours failed after its request went out: the peer may have switched to that
    // path and closed the one we still use (see onPathFailure). Cleared by the next commit.
    std::atomic<bool> handshakeUnsure{false};
    // Standby path (standby.cpp): an idle, authenticated connection to the peer on another rail,
    // opened by this end, so that a failover needs the handshake only. Under sbMu.
    std::mutex sbMu;
    UniqueFd standby;
    int standbyRail = -1;
    // The rail of its standby, made or being made (-1: none). The connections that share a rail
    // land on their standbys together when it fails: the next standby's rail counts these
    // (standbyRailFor), so that they spread over the other rails.
    std::atomic<int> standbyTarget{-1};
    std::atomic<bool> standbyReplace{false};  // the next standby made replaces the one in place
    // The rail a failover without a standby is moving it to (-1: none): counted by the next pick
    // until the move is done (pickMoveRail), so that connections moving at once spread.
    std::atomic<int> movingTo{-1};
    uint64_t standbyRetryNs = 0;            // after a failed try, not before this (CLOCK_MONOTONIC)
    std::atomic<bool> standbyMaking{false};  // a standby job is queued or running
  };
  // Where one migration's time went (CLOCK_MONOTONIC ns; 0: not reached). Logged with the
  // failover line (logMigration) so a benchmark's log shows the split per fault.
  struct Timeline {
    uint64_t signalNs = 0;   // first signal of the fault
    uint64_t emitNs = 0;     // in-process detector: its thread decided (0: another source)
    uint64_t seenNs = 0;     // in-process detector: the monitor thread read the event
    uint64_t queuedNs = 0;   // job queued (monitor) / hello or request seen (passive end)
    uint64_t runningNs = 0;  // a migrator thread runs it
    uint64_t pathNs = 0;     // new path ready: connected, or standby taken
    uint64_t sentNs = 0;     // hello + request sent
    uint64_t replyNs = 0;    // reply received (passive end: request read)
    uint64_t commitNs = 0;   // new path committed and started
    bool standby = false;    // the path was a pre-connected standby
  };
  // The two directions of a handshake's byte stream (a socket, or the relay pipe).
  using HandshakeIo = core::ByteIo;
  // A standby path the peer opened to this rank (this rank answers on it).
  struct PassiveStandby {
    UniqueFd fd;
    ConnId id;
    int peer = -1;
    int rail = -1;
  };
  struct Job {
    ConnId id;
    MigrateReason reason = MigrateReason::kLinkDown;
    FaultSource source = FaultSource::kPoll;
    int fromRail = -1;    // the rail being left (-1: any)
    int toRail = -1;      // fail-back target (-1: choose)
    uint64_t faultNs = 0; // first signal (CLOCK_MONOTONIC)
    uint64_t emitNs = 0;  // in-process detector: its decision; the monitor read it at seenNs
    uint64_t seenNs = 0;
    uint64_t queuedNs = 0;
  };
  struct Passive {
    UniqueFd fd;
    core::Hello hello;
    uint64_t arrivedNs = 0;
  };
  enum class Attempt { kDone, kStale, kNotReady, kFailed };

  explicit Failover(core::Comm& comm);
  Status start();
  void stop();

  // monitor.cpp
  void monitorLoop();
  void stopDetector() noexcept;
  // Tracks the TCP connections made since the last call; true when there were any. Cheap when
  // none were (the port maps' sizes, under try_lock).
  bool refreshConns();
  std::atomic<size_t> portsSeen_{0};  // ports (both maps) at the last complete walk
  std::atomic<bool> connsAdded_{false};  // refreshConns tracked new ones (the monitor clears it)
  std::atomic<std::thread::id> monitorId_{};
  void wakeMonitor() noexcept;  // an early wake-up of the monitor's poll (wakeFd_)
  bool haveConns();
  uint64_t stallScanPeriodNs() const;
  bool grayHeld() const;  // monitor thread
  void pollNics(uint64_t nowNs);
  void scanStalls(uint64_t nowNs);
  // `emitNs`: when the in-process detector decided (its thread), for the migration's timeline.
  void railDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason = MigrateReason::kLinkDown,
                uint64_t emitNs = 0);
  // src: who declared the rail up (the fail-back's source in its log line and job).
  void railBackUp(int rail, uint64_t signalNs, FaultSource src = FaultSource::kPoll);
  void moveOffGrayRails(int peer, FaultSource src, uint64_t signalNs);
  // A DEGRADED that the retransmits of a known hard fault explain is held, not acted on (railDown).
  bool grayExplained(int rail, uint64_t nowNs);
  void tendGray(uint64_t nowNs);
  bool onPathFailure(const channel::PortId& id, bool isSender, const Status& s);
  void enqueue(Job j);
  // Keepalive probes make an idle connection's dead path visible to the stall check; the kernel
  // itself never gives up on it (we decide, within RECCL_FAILOVER_TIMEOUT_MS).
  void armSocket(int fd) const;

  // migrate.cpp
  // Pre-started migrator threads serve both queues (jobs this rank initiates, handshakes the
  // peers open); one more starts when all are busy, so a blocked connect never queues a fault.
  void migratorLoop();
  void startMigrator();  // under poolMu_
  void runJob(const Job& j);
  // One try on `rail`: over `standby` when given (handshake only), else a new connection.
  Attempt attempt(Conn& c, int rail, const Job& j, Deadline deadline, UniqueFd standby, Status* err,
                  uint32_t* epochOut, uint64_t* resentOut, Timeline* tl);
  // The initiator's handshake on a new path, shared by the direct, standby and relay routes:
  // (hello +) request out, reply in, commit. `fd`/`relay` is the path committed on success.
  Attempt handshake(Conn& c, int rail, const Job& j, bool withHello, const HandshakeIo& io, UniqueFd fd,
                    RelayLink* relay, Status* err, uint32_t* epochOut, uint64_t* resentOut, Timeline* tl);
  void handlePassive(Passive p);
  // The passive end of a handshake whose request has been read (new connection or standby).
  void servePassive(UniqueFd fd, const core::Hello& h, const MigrateRequest& req, Timeline tl);
  // Switches c's port to `fd` at epoch `epoch` (c.mu held). `reply` (passive end) is sent on the
  // new socket before its path starts. Returns payload bytes to be resent (sender end).
  // `relay` (relay.cpp): the new path is the shared-memory pipe to a relay rank instead of `fd`.
  // `reason`: why the connection moves (a planned move off a healthy rail is noted, see railLeftNs_).
  Result<uint64_t> commitLocked(Conn& c, UniqueFd fd, uint32_t epoch, int rail, MigrateReason reason,
                                uint64_t peerReceived, uint64_t peerApplied, MigrateReply* reply,
                                RelayLink* relay = nullptr);
  void unrecoverable(Conn& c, const Status& s);
  void logMigration(const Conn& c, const Job& j, uint32_t epoch, int rail, uint64_t resent, bool initiated,
                    uint64_t commitNs, const Timeline* tl = nullptr);
  // A control thread's scheduling (thread_sched.h): SCHED_FIFO at RECCL_FAILOVER_RT_PRIO when set
  // and permitted, else the short slice of RECCL_FAILOVER_SLICE_US where the kernel has them.
  // Names the thread `threadName` (15 characters at most).
  void applyThreadSched(const char* what, const char* threadName);

  // standby.cpp: pre-connected standby paths (RECCL_FAILOVER_STANDBY).
  // Monitor thread: queues standby jobs for connections without one; returns when to run next.
  uint64_t tendStandbys(uint64_t nowNs);
  void makeStandby(Conn& c);          // a migrator thread: connect + register at the peer
  // The rail for c's standby: the lowest (load + 1) / weight over the usable rails other than
  // c's, where load counts the connections of c's role on each rail plus the standbys of the
  // others that share c's rail (they move together when it fails). With `score`: that cost for
  // `score->first` and for the best rail, instead (tendStandbys' re-placement).
  int standbyRailFor(Conn& c, std::pair<double, double>* score = nullptr, int scoreRail = -1);
  // A failover's rail when it has no standby: pickRail over the loads of c's direction plus the
  // rails the others are moving to right now; claimed in c.movingTo.
  int pickMoveRail(Conn& c, const std::vector<double>& weights);
  std::mutex pickMu_;  // a rail is picked and claimed (standbyTarget, movingTo) under it
  // Takes c's standby if it is on a rail usable for this job and still alive.
  UniqueFd takeStandby(Conn& c, const Job& j, const std::set<int>& tried, int* rail);
  void dropStandbys(int rail);        // a rail went down here: its standbys (both kinds) go
  void registerPassiveStandby(PassiveStandby ps);
  void standbyWatcherLoop();
  bool standbyOn_ = true;
  int rtPrio_ = 0;
  uint64_t sliceNs_ = 0;
  std::atomic<bool> rtLogged_{false};
  std::atomic<bool> sliceLogged_{false};
  std::mutex psMu_;
  std::vector<PassiveStandby> passiveStandbys_;  // under psMu_
  int sbWakeFd_ = -1;                            // eventfd: passive standby set changed / stop
  uint64_t standbyDueNs_ = 0;                    // monitor thread: next upkeep (0: at the next wake-up)
  std::thread watcher_;
  std::atomic<uint64_t> standbyFailovers_{0};
  std::shared_ptr<Conn> find(const ConnId& id);
  std::vector<std::shared_ptr<Conn>> snapshot();
  uint64_t peerRails(int peer);
  void setPeerRails(int peer, uint64_t mask);
  std::vector<double> railWeights(int peer);
  // Connections per rail: all of this rank's, or those where this rank has `role` (the senders
  // load a NIC's transmit side, the receivers its receive side).
  std::vector<int> railLoads(std::optional<Role> role = std::nullopt);
  bool broken() const;

  // relay.cpp: the relay route (RECCL_FAILOVER_ROUTE) and this rank's relay server.
  enum class RelayOutcome { kDone, kStale, kFallBack };
  Status startRelay();
  void stopRelay();
  bool routeWantsRelay(const Conn& c, const Job& j);
  std::vector<std::pair<int, int>> relayCandidates(const Conn& c, const Job& j);  // (relay rank, rail)
  // Tries the relay route for one migration job; kFallBack: use the direct route.
  RelayOutcome relayFirst(Conn& c, const Job& j, Deadline deadline);
  Attempt relayAttempt(Conn& c, int via, int rail, const Job& j, Deadline deadline, Status* err, uint32_t* epochOut,
                       uint64_t* resentOut);
  void startRelayPath(Conn& c, RelayLink link, uint64_t resume, uint32_t epoch, int rail);
  void relayRailDown(int rail);

  // rail_meter.cpp: measured throughput per rail (monitor thread samples, migrations read).
  void meterRails(uint64_t nowNs);  // cheap until its period is up
  uint64_t meterDueNs() const;      // monitor thread
  std::vector<double> measuredBps() const;
  mutable std::mutex meterMu_;
  std::vector<double> railBps_;                            // under meterMu_
  uint64_t meterLastNs_ = 0;                               // monitor thread
  uint64_t meterLastUsable_ = 0;                           // monitor thread
  std::map<ConnId, std::pair<int, uint64_t>> meterSeen_;   // monitor thread: fd, bytes

  std::string route_ = "auto";
  bool nicAffinity_ = false;
  std::unique_ptr<RelayServer> relay_;
  std::atomic<uint64_t> relayMigrations_{0};

  core::Comm& comm_;
  int rank_ = 0;
  int nrails_ = 1;
  int64_t stallMs_ = 2000;
  int64_t timeoutMs_ = 5000;
  int64_t pollMs_ = 5;
  int64_t holdDownMs_ = 1000;
  bool pollNics_ = true;

  std::atomic<uint64_t> railsUp_{0};
  std::array<std::atomic<uint64_t>, kMaxRails> railEpoch_{};
  std::vector<uint64_t> nicUpSinceNs_;  // monitor thread: physical up since (0: down)
  std::vector<bool> nicDown_;           // monitor thread: declared down by the poll source
  int ifSock_ = -1;
  int wakeFd_ = -1;                     // eventfd: stop or wake the monitor thread
  // The in-process link detector (BPF or rtnetlink) when one runs; else the NIC poll.
  struct DetectorLink;
  std::unique_ptr<DetectorLink> det_;
  std::string detectorName_ = "none";
  std::string lastDetectorSource_;  // monitor thread
  void drainDetector();
  int detectorFd() const;
  // Source choice, the node daemon as a source, fallback and reconnection (fault_sources.cpp).
  struct Sources;
  struct SourcesDeleter {
    void operator()(Sources* s) const noexcept;
  };
  std::unique_ptr<Sources, SourcesDeleter> src_;
  void startSources();
  void startSourcesInOrder();
  void tickSources(uint64_t nowNs, short daemonRevents);  // at every monitor wake-up
  uint64_t sourcesDueNs(uint64_t nowNs) const;             // when the sources want the next tick
  int daemonFd() const;
  void stopSources() noexcept;
  void startInProcessAsync();  // loads the in-process detector off the monitor thread
  // Makes this rank's rail state agree with a source that just took over (rail -> usable).
  void reconcileRails(const std::vector<std::pair<int, bool>>& states, FaultSource src, const char* why);
  // The fault source in use, for recclCommGetStats (fault_sources.cpp): published by the monitor
  // thread whenever it changes, read by any thread.
  void publishSource();
  void fillSourceStats(core::CommStats* s) const;
  mutable std::mutex sourceMu_;
  uint32_t sourceKind_ = 1;        // recclFaultSource_t (under sourceMu_)
  std::string sourceInUse_ = "in-band";  // under sourceMu_
  bool sourceStarting_ = true;  // under sourceMu_: sources not started yet, or one still loading

  std::mutex connsMu_;
  std::map<ConnId, std::shared_ptr<Conn>> conns_;
  std::mutex peerMu_;
  std::vector<uint64_t> peerRailsUp_;
  // Last time a peer's railsUp (migration request or reply) had each rail down, or first had it
  // up again after down; the DEGRADED
  // signals held because of a known fault (monitor thread, nrails_ entries). See railDown.
  std::array<std::atomic<uint64_t>, kMaxRails> peerRailDownNs_{};
  // Last time a fail-back or rebalance moved a connection off each rail while the rail was healthy
  // at both ends: the retired sockets close with data in flight and retransmit on it a while.
  std::array<std::atomic<uint64_t>, kMaxRails> railLeftNs_{};
  struct GrayHold {
    uint64_t sinceNs = 0;      // 0: nothing held
    uint64_t explainedNs = 0;  // last time a known fault still explained it
    uint64_t upNs = 0;         // the rail last came back up here after a hard fault
    bool hardDown = false;     // the rail is down here for a hard fault (not DEGRADED)
    FaultSource src = FaultSource::kDetector;
  };
  std::vector<GrayHold> grayHold_;

  std::mutex qMu_;
  std::condition_variable qCv_;
  std::deque<Job> jobs_;
  std::deque<Passive> passive_;
  std::atomic<bool> stop_{false};
  std::mutex monMu_;
  std::condition_variable monCv_;
  std::thread monitor_;
  std::mutex poolMu_;
  std::vector<std::thread> pool_;  // under poolMu_
  int idle_ = 0;                   // migrator threads waiting (under qMu_)

  std::atomic<uint64_t> failovers_{0};
  std::atomic<uint64_t> failbacks_{0};
  std::atomic<uint64_t> bytesResent_{0};
  std::atomic<uint64_t> lastFailoverUs_{0};
  std::atomic<uint64_t> lastFailoverSignalNs_{0};
};

}  // namespace reccl::failover
