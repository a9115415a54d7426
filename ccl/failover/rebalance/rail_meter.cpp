#include "failover/rebalance/rail_meter.h"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "failover/context.h"
#include "failover/rebalance/rebalance.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {

constexpr uint64_t kIntervalMs = 100;
constexpr double kAlpha = 0.3;                // about the last second carries the estimate
constexpr uint64_t kMinBytes = 1u << 20;      // an interval below 1 MiB is idle, not slow
constexpr uint64_t kEarlyNs = 2'000'000;      // the monitor's wake-up may come this much early

}  // namespace

uint64_t RailMeter::dueNs() const { return lastNs_ == 0 ? 0 : lastNs_ + kIntervalMs * 1000000ull; }

std::vector<double> RailMeter::measuredBps() const {
  std::lock_guard lk(mu_);
  if (bps_.empty()) return std::vector<double>(ctx_.cfg.nrails, 0.0);
  return bps_;
}

void RailMeter::meter(uint64_t nowNs) {
  const int nrails = ctx_.cfg.nrails;
  if (lastNs_ == 0) {
    lastNs_ = nowNs;
    std::lock_guard lk(mu_);
    bps_.assign(nrails, 0.0);
    return;
  }
  uint64_t usable = ctx_.rails.upMask();
  bool changed = usable != lastUsable_;
  if (nowNs + kEarlyNs < lastNs_ + kIntervalMs * 1000000ull && !changed) return;
  double secs = static_cast<double>(nowNs - lastNs_) / 1e9;
  lastNs_ = nowNs;
  std::vector<uint64_t> moved(nrails, 0);
  for (auto& c : ctx_.conns.snapshot()) {
    int rail = c->rail.load();
    channel::Path* path = c->port->path();
    if (!path || rail < 0 || rail >= nrails) continue;
    transport::PathSample s = ctx_.paths.sample(*path, ctx_.cfg.stallMs);
    if (!s.known) continue;  // a relay pipe: its bytes leave through the relay rank's NIC
    auto& seen = seen_[c->id];
    // A migrated connection has a new path whose counters start from zero.
    if (seen.first == s.pathId && s.bytes >= seen.second) moved[rail] += s.bytes - seen.second;
    seen = {s.pathId, s.bytes};
  }
  std::vector<double> bps;
  {
    std::lock_guard lk(mu_);
    for (int r = 0; r < nrails; ++r) bps_[r] = smoothThroughput(bps_[r], moved[r], secs, kAlpha, kMinBytes);
    bps = bps_;
  }
  if (changed) {
    // Failover or fail-back: the weights the next migrations use.
    lastUsable_ = usable;
    auto w = weightsFromThroughput(bps, usable);
    std::string text;
    for (int r = 0; r < nrails; ++r) {
      char buf[64];
      snprintf(buf, sizeof(buf), "%s%d:%.2f(%.0f MB/s)", r ? " " : "", r, w[r], bps[r] / 1e6);
      text += buf;
    }
    RECCL_INFO(kLogFailover, "rank %d: rail weights %s (rails up 0x%" PRIx64 ")", ctx_.cfg.rank, text.c_str(), usable);
  }
}

}  // namespace reccl::failover
