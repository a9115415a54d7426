// Measured throughput per rail: every 100 ms the monitor thread adds up the bytes each rail's
// connections moved (the path factory's sample: TCP_INFO bytes acked + received on sockets, verbs
// writes completed + steps landed) and smooths the rate per rail (rebalance.h); migrations pick
// rails with these weights.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "failover/migration/migrate_wire.h"

namespace reccl::failover {

struct FailoverContext;

// Lock rule: mu_ guards bps_ (the monitor thread writes, migrations read); the rest belongs to the
// monitor thread.
class RailMeter {
 public:
  explicit RailMeter(FailoverContext& ctx) : ctx_(ctx) {}
  // Monitor thread: cheap until its period is up, or at once when the healthy rails changed.
  void meter(uint64_t nowNs);
  uint64_t dueNs() const;
  std::vector<double> measuredBps() const;

 private:
  FailoverContext& ctx_;
  mutable std::mutex mu_;
  std::vector<double> bps_;  // under mu_
  uint64_t lastNs_ = 0;
  uint64_t lastUsable_ = 0;
  std::map<ConnId, std::pair<uint64_t, uint64_t>> seen_;  // path id, bytes at the last sample
};

}  // namespace reccl::failover
