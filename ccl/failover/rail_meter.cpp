// Rail weights from measured throughput: every kIntervalMs the monitor thread adds up the bytes
// each rail's TCP connections moved (TCP_INFO bytes_acked + bytes_received) and smooths the rate
// per rail (rebalance.h). Migrations (failover, fail-back) pick rails with these weights.
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with bytes_acked/bytes_received (glibc's copy lacks them)
#include <sys/socket.h>

#include <cinttypes>

#include "core/comm.h"
#include "failover/failover.h"
#include "failover/rebalance.h"
#include "reccl/common/log.h"

namespace reccl::failover {
namespace {

constexpr uint64_t kIntervalMs = 100;
constexpr double kAlpha = 0.3;                // about the last second carries the estimate
constexpr uint64_t kMinBytes = 1u << 20;      // an interval below 1 MiB is idle, not slow
constexpr uint64_t kEarlyNs = 2'000'000;      // the monitor's wake-up may come this much early

}  // namespace

uint64_t Failover::meterDueNs() const { return meterLastNs_ == 0 ? 0 : meterLastNs_ + kIntervalMs * 1000000ull; }

std::vector<double> Failover::measuredBps() const {
  std::lock_guard lk(meterMu_);
  if (railBps_.empty()) return std::vector<double>(nrails_, 0.0);
  return railBps_;
}

void Failover::meterRails(uint64_t nowNs) {
  if (meterLastNs_ == 0) {
    meterLastNs_ = nowNs;
    std::lock_guard lk(meterMu_);
    railBps_.assign(nrails_, 0.0);
    return;
  }
  uint64_t usable = railsUp_.load();
  bool changed = usable != meterLastUsable_;
  if (nowNs + kEarlyNs < meterLastNs_ + kIntervalMs * 1000000ull && !changed) return;
  double secs = static_cast<double>(nowNs - meterLastNs_) / 1e9;
  meterLastNs_ = nowNs;
  std::vector<uint64_t> moved(nrails_, 0);
  for (auto& c : snapshot()) {
    int fd = c->fd.load();
    int rail = c->rail.load();
    if (fd < 0 || rail < 0 || rail >= nrails_) continue;
    tcp_info ti{};
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) continue;
    uint64_t total = ti.tcpi_bytes_acked + ti.tcpi_bytes_received;
    auto& seen = meterSeen_[c->id];
    // A migrated connection has a new socket whose counters start from zero.
    if (seen.first == fd && total >= seen.second) moved[rail] += total - seen.second;
    seen = {fd, total};
  }
  std::vector<double> bps;
  {
    std::lock_guard lk(meterMu_);
    for (int r = 0; r < nrails_; ++r) railBps_[r] = smoothThroughput(railBps_[r], moved[r], secs, kAlpha, kMinBytes);
    bps = railBps_;
  }
  if (changed) {
    // Failover or fail-back: the weights the next migrations use.
    meterLastUsable_ = usable;
    auto w = weightsFromThroughput(bps, usable);
    std::string text;
    for (int r = 0; r < nrails_; ++r) {
      char buf[64];
      snprintf(buf, sizeof(buf), "%s%d:%.2f(%.0f MB/s)", r ? " " : "", r, w[r], bps[r] / 1e6);
      text += buf;
    }
    RECCL_INFO(kLogFailover, "rank %d: rail weights %s (rails up 0x%" PRIx64 ")", rank_, text.c_str(), usable);
  }
}

}  // namespace reccl::failover
