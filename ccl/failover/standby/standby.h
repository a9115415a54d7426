// Pre-connected standby paths (RECCL_FAILOVER_STANDBY): each connection keeps, from each of its
// ends, an idle link to the peer on another rail, opened in the background once the connection
// exists and authenticated like a migration (data hello with the communicator's key, then a
// MigrateRequest with reason `standby`, answered by the peer, which only records it). A failover
// then sends the request over the standby and waits for the reply: no connect, no hello, no pass
// through the peer's data listener (the peer's standby watcher thread reads the request and
// commits at once). Each end opens its own standby so a link has one initiator and requests never
// cross. Liveness: the link's own keepalive (a dead standby errors within ~4 s on TCP), a look at
// every upkeep, and one more when it is taken; standbys on a rail that goes down here are closed,
// and one used (or now on the rail in use, after a fail-back) is replaced by the monitor's upkeep.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "failover/conn_table.h"
#include "failover/migration/job.h"
#include "reccl/common/status.h"
#include "transport/path_factory.h"

namespace reccl::failover {

struct FailoverContext;

// The wait after a connection's `failures`-th failed standby try in a row (>= 1): 0.5 s,
// doubling, at most kStandbyRetryMaxNs. A rail whose carrier is up but that carries nothing
// (a blackhole, a stalled NIC queue) fails every try by the connect's deadline, and nothing else
// says so to the standby upkeep.
inline constexpr uint64_t kStandbyRetryNs = 500'000'000;
inline constexpr uint64_t kStandbyRetryMaxNs = 16'000'000'000;
uint64_t standbyBackoffNs(uint32_t failures);

// Lock rule: a connection's own standby is under its Conn::sbMu; psMu_ guards the passive
// standbys (the watcher polls a copy of their descriptors, never holding psMu_ while it waits).
// The rail picker's lock may be taken with Conn::sbMu held, never the other way round.
class Standbys {
 public:
  explicit Standbys(FailoverContext& ctx) : ctx_(ctx) {}
  ~Standbys();
  Standbys(const Standbys&) = delete;
  Standbys& operator=(const Standbys&) = delete;

  Status init();
  void start();  // the standby watcher thread (passive end)
  // After FailoverContext::stop is set: wakes and joins the watcher; then (no migrator left)
  // closes every standby. stop() does both.
  void stopWatcher() noexcept;
  void closeAll() noexcept;
  void stop() noexcept {
    stopWatcher();
    closeAll();
  }

  // Monitor thread: queues standby jobs for connections without one; returns when to run next.
  uint64_t tend(uint64_t nowNs);
  // A migrator thread: opens c's standby (connect, hello, request, the peer's ok).
  void make(Conn& c);
  // Takes c's standby if it is on a rail usable for this job (not the one left, not tried) and
  // still alive; *rail says which.
  std::unique_ptr<transport::Link> take(Conn& c, const Job& j, uint64_t tried, int* rail);
  // A rail went down here: its standbys (both kinds) are as dead as the rail.
  void dropRail(int rail);
  // A rail here went down or came back: every connection's next standby try is at the next
  // upkeep (the rail they failed on may be the one back, or no longer the one picked), and its
  // back-off starts again from its first step. A try under way when this is called is followed by
  // the next at once if it fails.
  void retryFailedNow();
  // The peer made a standby to this rank on `rail`: the connections to it whose tries failed on
  // that rail (a fault at the peer's end, which no rail here showed, may be over) try again at the
  // next upkeep; one that fails again backs off further.
  void retryFailedNow(int peer, int rail);
  // The passive end of a standby the peer opened: this rank answers on it when the peer uses it.
  void registerPassive(std::unique_ptr<transport::Link> link, const ConnId& id, int peer, int rail);

 private:
  struct Passive {
    std::unique_ptr<transport::Link> link;
    ConnId id;
    int peer = -1;
    int rail = -1;
  };
  void watcherLoop();
  void wakeWatcher() noexcept;

  FailoverContext& ctx_;
  std::mutex psMu_;
  std::vector<Passive> passive_;  // under psMu_
  int wakeFd_ = -1;               // eventfd: passive standby set changed / stop
  std::thread watcher_;
};

}  // namespace reccl::failover
