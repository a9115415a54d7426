// The monitor: one thread per communicator that turns fault signals into rail state and
// migration jobs. It sleeps in poll() on its descriptors (wake-up eventfd, the in-process
// detector's events, the node daemon's socket) until the earliest deadline of its periodic work,
// which is only what a source needs: the NIC poll while that poll is the fault source (or hands
// rails back), the stall check every RECCL_STALL_TIMEOUT_MS / 20, the rail meter every 100 ms,
// standby upkeep, held DEGRADED signals, the daemon's liveness ping and link-state look. A
// detector event wakes it at once: nothing on the fault's path waits for a tick. An idle
// communicator with a detector wakes about ten times a second.
//
// A fault's moves over standbys are made here too: the request sent, the reply polled with the
// other descriptors and read, the commit (Migration::beginEarly, concludeEarly); other moves go
// to the migrator threads.
//
// It also decides on path failures the transports report (onPathFailure, the path-failure hook:
// the progress thread calls it) and on the rails peers report in their migration messages
// (peerReported, the migrator and standby threads call it).
#pragma once

#include <poll.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "channel/port.h"
#include "core/comm_stats.h"
#include "failover/health/fault_sources.h"
#include "failover/health/gray.h"
#include "failover/health/peer_loss.h"
#include "failover/migration/job.h"
#include "failover/migration/migrate_wire.h"
#include "failover/rebalance/fail_back_pacing.h"
#include "reccl/common/status.h"

namespace reccl::failover {

struct FailoverContext;

class Monitor {
 public:
  explicit Monitor(FailoverContext& ctx);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  Status init();
  void start();
  // After FailoverContext::stop is set: wakes the thread and joins it, then stops the sources.
  void stop() noexcept;
  void wake() noexcept;
  bool onThread() const noexcept { return threadId_.load(std::memory_order_acquire) == std::this_thread::get_id(); }

  // Rail signals (monitor thread). `emitNs`: when the in-process detector's state machine decided
  // (on this thread, which drives it), for the migration's timeline. railBackUp's `src`: who
  // declared the rail up (the fail-back's source in its log line and job).
  void railDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason = MigrateReason::kLinkDown,
                uint64_t emitNs = 0);
  void railBackUp(int rail, uint64_t signalNs, FaultSource src);
  // Any thread: a peer's healthy rails, from its migration request or reply; a rail back there
  // moves what stayed on a gray rail for want of one.
  void peerReported(int peer, uint64_t railsUp);
  // Any thread: a standby try to `peer` was answered on `rail` after tries there had failed, so the rail
  // carries to the peer again although no rail event said it stopped or came back (a blackhole
  // with its carrier up, which only the stall check saw, has ended). The connections to the peer
  // that prefer the rail, moved off it meanwhile, fail back when it is up at both ends.
  void railCarriesAgain(int peer, int rail, uint32_t failedTries);
  // The path-failure hook (progress thread and other path threads): decide and queue, never block.
  // `self`: the failing path (nullptr: not the port's own path).
  bool onPathFailure(const channel::PortId& id, const channel::Path* self, bool isSender, const Status& s);
  void fillStats(core::CommStats* s) const { sources_.fillStats(s); }
  const std::string& sourceName() const noexcept { return sources_.name(); }

 private:
  void loop();
  uint64_t stallScanPeriodNs() const;
  void scanStalls(uint64_t nowNs);
  void tendGray(uint64_t nowNs);
  GrayFacts grayFactsNow(int rail, uint64_t nowNs);
  bool grayExplainedNow(int rail, uint64_t nowNs) { return grayExplained(grayFactsNow(rail, nowNs)); }
  // A held DEGRADED's rail: do its connections to peers that have it up lose segments at the
  // detector's rule (health/peer_loss.h)? Samples them at most every few tens of ms.
  bool healthyPeersLose(int rail, const GrayFacts& facts);
  // railDown past its hold of an explained DEGRADED.
  void takeRailDown(int rail, FaultSource src, uint64_t signalNs, MigrateReason reason, uint64_t emitNs,
                    uint64_t seenNs);
  // Connections that stayed on a DEGRADED rail for want of a healthy one move as soon as one
  // appears: a rail up again here (railBackUp) or at the peer (peerReported). peer -1: all.
  void moveOffGrayRails(int peer, FaultSource src, uint64_t signalNs);
  // Fail-back jobs for the connections (to `peer`; -1: all) that prefer `rail` and are
  // elsewhere; how many.
  int enqueueFailBacks(int rail, FaultSource src, uint64_t signalNs, int peer = -1);
  // A fail-back's one try can fail on a rail that is up but does not carry yet (a switch port
  // still learning after the link came up, a path that drops until a neighbour settles); the
  // connections would then stay off the repaired rail until its next up event, and a later fault
  // there would find nothing to move. While the rail stays up, what still prefers it is offered
  // its fail-back again, at growing intervals.
  void tendFailBacks(uint64_t nowNs);
  uint64_t failBackDueNs() const noexcept;

  FailoverContext& ctx_;
  FaultSources sources_;
  int wakeFd_ = -1;  // eventfd: stop or wake the monitor thread
  std::atomic<std::thread::id> threadId_{};
  std::thread thread_;
  uint64_t standbyDueNs_ = 0;  // monitor thread: next standby upkeep (0: at the next wake-up)
  struct FailBackRetry {
    uint64_t dueNs = 0;  // 0: nothing owed
    int tries = 0;
    FaultSource src = FaultSource::kDetector;
  };
  std::vector<FailBackRetry> failBackRetry_;  // monitor thread, per rail
  struct PeerLoss {
    PeerLossWindows windows;
    uint64_t dueNs = 0;  // next reading
    int crossings = 0;   // readings in a row whose verdict was gray
  };
  std::vector<PeerLoss> peerLoss_;  // monitor thread, per rail, while its DEGRADED is held
  // railCarriesAgain (any thread): the rails whose standby-made fail-backs the monitor thread is
  // to keep offering (failBackRetry_, as after an up event), and per (peer, rail) when it last
  // acted and how long it holds off now: a rail that carries a connect but not a collective (the
  // stall check moves the connections off again) would otherwise bounce them every few seconds.
  std::atomic<uint64_t> standbyFailBacksOwed_{0};
  std::mutex carriesMu_;
  std::map<std::pair<int, int>, CarriesHold> carries_;  // under carriesMu_
  // Moves whose request this thread sent over a standby (Migration::beginEarly): their links'
  // descriptors are polled with the others, and each reply read as it comes (concludeEarly).
  std::vector<Job> early_;  // monitor thread
  void concludeReplied(std::span<const pollfd> polled, uint64_t nowNs);
};

}  // namespace reccl::failover
