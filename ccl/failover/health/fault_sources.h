// The monitor's fault sources and their upkeep: the node daemon if one answers, else the
// in-process detector, else the NIC poll (planSources gives the order for RECCL_DETECTOR). When
// the daemon goes away the NIC poll takes over at once (no fault is missed while the next source
// starts), the in-process detector starts off the monitor thread where the plan has it, and the
// daemon is tried again with a growing period; once it answers it is the source again. Rail
// signals go to the Monitor (railDown / railBackUp). Everything here runs on the monitor thread
// but fillStats.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/comm_stats.h"
#include "failover/health/nic_poll.h"
#include "failover/health/rail_state.h"
#include "reccl/common/status.h"

namespace reccl::failover {

struct FailoverContext;
class Monitor;

class FaultSources {
 public:
  FaultSources(FailoverContext& ctx, Monitor& monitor);
  ~FaultSources();
  FaultSources(const FaultSources&) = delete;
  FaultSources& operator=(const FaultSources&) = delete;

  // At communicator init: refuses an unknown RECCL_DETECTOR, opens the NIC poll's socket.
  Status init();
  // Monitor thread: the sources in the plan's order (the first that starts is in use).
  void start();
  // At every monitor wake-up: the daemon's events, liveness and link-state array, an in-process
  // detector that finished loading, a retry of the daemon, the poll's hand-back.
  void tick(uint64_t nowNs, short daemonRevents);
  // When the sources want the next tick (UINT64_MAX: never).
  uint64_t dueNs(uint64_t nowNs) const;
  // The NIC poll: whether it runs (it is the source, or hands rails back), and one look.
  bool pollActive() const noexcept { return pollNics_; }
  void pollNics(uint64_t nowNs);
  int daemonFd() const;
  int detectorFd() const;
  void drainDetector();
  // The name of the source behind the latest rail signal (for the rail-down log line).
  const std::string& lastSignalSource() const noexcept { return lastSource_; }
  const std::string& name() const noexcept { return detectorName_; }
  void stop() noexcept;
  // The fault source in use, for recclCommGetStats (any thread).
  void fillStats(core::CommStats* s) const;

 private:
  struct Sources;
  struct SourcesDeleter {
    void operator()(Sources* s) const noexcept;
  };
  struct DetectorLink;
  void startInOrder();
  void startInProcessAsync();  // loads the in-process detector off the monitor thread
  void stopDetector() noexcept;
  // Makes this rank's rail state agree with a source that just took over (rail -> usable).
  void reconcile(const std::vector<std::pair<int, bool>>& states, FaultSource src, const char* why);
  void publish();

  FailoverContext& ctx_;
  Monitor& monitor_;
  std::unique_ptr<Sources, SourcesDeleter> src_;
  std::unique_ptr<DetectorLink> det_;  // the in-process detector when one runs
  NicPoll poll_;
  bool pollNics_ = true;
  std::string detectorName_ = "none";
  std::string lastSource_;
  std::vector<std::string> nicNames_;  // per rail

  // The source in use, published by the monitor thread whenever it changes. Under sourceMu_.
  mutable std::mutex sourceMu_;
  uint32_t sourceKind_ = 1;              // recclFaultSource_t
  std::string sourceInUse_ = "in-band";
  bool sourceStarting_ = true;  // sources not started yet, or one still loading
};

}  // namespace reccl::failover
