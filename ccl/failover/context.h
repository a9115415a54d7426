// What the parts of one communicator's failover share: the communicator (through its narrow
// interface), the transport's path factory, the settings read at start, the rail state, the
// tracked connections, the counters, and the parts themselves. Failover (failover.h) owns it and
// every part; a part reaches another only through here.
//
// Parts and their threads (docs/architecture.md has the whole map):
//   Monitor        monitor.h           the monitor thread: fault sources -> rail state -> jobs
//   FaultSources   health/             daemon, in-process detector, NIC poll (monitor thread)
//   RailState      health/             rails up here and at the peers, gray-failure holds
//   Migration      migration/          migrator threads: queue, handshake, commit, resend
//   Standbys       standby/            pre-connected paths, the standby watcher thread
//   RelayRoute     relay/              forwarding through a same-host rank, its relay server
//   RailPicker     rebalance/          rail choice by load and measured weight
//   RailMeter      rebalance/          measured throughput per rail (monitor thread)
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/failover_host.h"
#include "failover/conn_table.h"
#include "failover/health/rail_state.h"
#include "failover/thread_sched.h"
#include "transport/path_factory.h"

namespace reccl::failover {

class Monitor;
class Migration;
class Standbys;
class RelayRoute;
class RailPicker;
class RailMeter;

// Read once at start (failover.cpp), constant after.
struct Settings {
  int rank = 0;
  int nrails = 1;
  int64_t stallMs = 2000;      // RECCL_STALL_TIMEOUT_MS
  int64_t timeoutMs = 5000;    // RECCL_FAILOVER_TIMEOUT_MS
  int64_t pollMs = 5;          // RECCL_FAILOVER_POLL_MS
  int64_t holdDownMs = 1000;   // RECCL_HOLDDOWN_MS
  bool standbyOn = true;       // RECCL_FAILOVER_STANDBY, and more than one rail
  int rtPrio = 0;              // RECCL_FAILOVER_RT_PRIO
  uint64_t sliceNs = 0;        // RECCL_FAILOVER_SLICE_US
  std::string detector;        // RECCL_DETECTOR
  std::string route = "auto";  // RECCL_FAILOVER_ROUTE
  bool nicAffinity = false;    // RECCL_NIC_AFFINITY
  int64_t retransWindowMs = 500;  // RECCL_RETRANS_WINDOW_MS (gray-failure holds)
  int64_t retransPoolWindows = 8; // RECCL_RETRANS_POOL (gray-failure holds)
  int64_t retransThreshold = 12;  // RECCL_RETRANS_THRESHOLD (whose retransmits a held one is)
  int64_t retransPerMille = 3;    // RECCL_RETRANS_RATE (the same)
  int64_t rdmaLossWindowMs = 1000; // RECCL_RDMA_LOSS_WINDOW_MS (gray-failure holds)
  int64_t rdmaLossPoolWindows = 4; // RECCL_RDMA_LOSS_POOL (gray-failure holds)
  int64_t degradedClearMs = 5000; // RECCL_DEGRADED_CLEAR_MS
};

// recclCommGetStats' failover counters (any thread adds, fillStats reads).
struct Counters {
  std::atomic<uint64_t> failovers{0};
  std::atomic<uint64_t> failbacks{0};
  std::atomic<uint64_t> bytesResent{0};
  std::atomic<uint64_t> lastFailoverUs{0};
  std::atomic<uint64_t> lastFailoverSignalNs{0};
  std::atomic<uint64_t> standbyFailovers{0};
  std::atomic<uint64_t> relayMigrations{0};
};

struct FailoverContext {
  FailoverContext(core::FailoverHost& h, Settings s)
      : host(h), paths(h.paths()), cfg(std::move(s)), rails(cfg.nrails), conns(*this),
        threads(cfg.rank, cfg.rtPrio, cfg.sliceNs) {}
  FailoverContext(const FailoverContext&) = delete;
  FailoverContext& operator=(const FailoverContext&) = delete;

  core::FailoverHost& host;
  transport::PathFactory& paths;
  const Settings cfg;
  std::atomic<bool> stop{false};  // set first thing in Failover::stop
  RailState rails;
  ConnTable conns;
  Counters counters;
  ControlThreads threads;  // the monitor's, migrators' and standby watcher's scheduling

  // The parts (Failover makes them; they live until it goes).
  Monitor* monitor = nullptr;
  Migration* migration = nullptr;
  Standbys* standbys = nullptr;
  RelayRoute* relay = nullptr;
  RailPicker* picker = nullptr;
  RailMeter* meter = nullptr;

  bool stopping() const noexcept { return stop.load(); }
  bool broken() const { return host.broken(); }
  // The name of this rank's NIC on `rail` (logs).
  const char* nicName(int rail) const {
    const auto& n = host.nics();
    return rail >= 0 && static_cast<size_t>(rail) < n.size() ? n[rail].name.c_str() : "?";
  }
};

}  // namespace reccl::failover
