#include "reccl/detector/detector_options.h"

#include <net/if.h>

#include <cstdint>

#include "reccl/common/params.h"

namespace reccl::detector {

Result<SourceMode> parseSourceMode(std::string_view text) {
  if (text == "auto") return SourceMode::kAuto;
  if (text == "bpf") return SourceMode::kBpf;
  if (text == "netlink" || text == "rtnetlink") return SourceMode::kNetlink;
  return Status(Errc::kInvalidArgument,
                "source: expected auto, bpf or netlink, got '" + std::string(text) + "'");
}

const char* sourceModeName(SourceMode m) noexcept {
  switch (m) {
    case SourceMode::kAuto: return "auto";
    case SourceMode::kBpf: return "bpf";
    case SourceMode::kNetlink: return "netlink";
  }
  return "unknown";
}

Result<WatchSpec> parseWatchSpec(std::string_view text) {
  WatchSpec w;
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    w.ifname = std::string(text);
  } else {
    w.netns = std::string(text.substr(0, colon));
    w.ifname = std::string(text.substr(colon + 1));
    if (w.netns.empty())
      return Status(Errc::kInvalidArgument, "watch: empty namespace in '" + std::string(text) + "'");
  }
  if (w.ifname.empty() || w.ifname.size() >= IFNAMSIZ ||
      w.ifname.find_first_of("/ \t") != std::string::npos)
    return Status(Errc::kInvalidArgument, "dev: bad interface name '" + w.ifname + "'");
  return w;
}

DetectorOptions DetectorOptions::fromEnv() {
  DetectorOptions o;
  std::string mode = params::Detector();
  if (auto m = parseSourceMode(mode); m.ok()) o.mode = m.value();
  auto ms = [](int64_t v) { return static_cast<uint64_t>(v < 0 ? 0 : v) * 1'000'000ull; };
  o.stateMachine.holdDownNs = ms(params::HoldDownMs());
  o.stateMachine.degradedClearNs = ms(params::DegradedClearMs());
  o.stateMachine.damping.penaltyPerFlap = static_cast<double>(params::DampingPenalty());
  o.stateMachine.damping.suppressThreshold = static_cast<double>(params::DampingSuppress());
  o.stateMachine.damping.reuseThreshold = static_cast<double>(params::DampingReuse());
  o.stateMachine.damping.halfLifeNs = ms(params::DampingHalfLifeMs());
  o.bpf.retransThreshold = static_cast<uint32_t>(params::RetransThreshold());
  o.bpf.retransWindowNs = ms(params::RetransWindowMs());
  // Out-of-range values stay out of range so validate() names them.
  int64_t scanUs = params::DetectorScanUs();
  o.bpf.scanPeriodNs = scanUs < 0 || scanUs > 1'000'000 ? UINT64_MAX : static_cast<uint64_t>(scanUs) * 1000;
  // Per mille in the environment; out-of-range values stay out of range so validate() names them.
  int64_t rate = params::RetransRate();
  o.bpf.retransRatePpm = rate < 0 || rate > 1000 ? UINT32_MAX : static_cast<uint32_t>(rate * 1000);
  int64_t pool = params::RetransPool();
  o.bpf.retransPoolWindows = pool < 0 || pool > RECCL_RETRANS_POOL_MAX ? UINT32_MAX : static_cast<uint32_t>(pool);
  // Out-of-range values stay out of range so validate() names them.
  int64_t lossMs = params::RdmaLossWindowMs();
  o.rdmaLoss.windowNs = lossMs < 0 || lossMs > 60'000 ? UINT64_MAX : ms(lossMs);
  int64_t lossN = params::RdmaLossThreshold();
  o.rdmaLoss.threshold = lossN < 1 || lossN > UINT32_MAX ? 0 : static_cast<uint32_t>(lossN);
  int64_t lossPpm = params::RdmaLossPpm();
  o.rdmaLoss.ratePpm = lossPpm < 0 || lossPpm > 1'000'000 ? UINT32_MAX : static_cast<uint32_t>(lossPpm);
  int64_t lossPool = params::RdmaLossPool();
  o.rdmaLoss.poolWindows = lossPool < 0 || lossPool > kRdmaLossPoolMax ? UINT32_MAX : static_cast<uint32_t>(lossPool);
  return o;
}

Status DetectorOptions::validate() const {
  const auto& d = stateMachine.damping;
  if (d.penaltyPerFlap < 0) return Status(Errc::kInvalidArgument, "damping-penalty: must be >= 0");
  if (d.reuseThreshold > d.suppressThreshold)
    return Status(Errc::kInvalidArgument, "damping-reuse: must not exceed damping-suppress");
  if (d.maxPenalty < d.suppressThreshold)
    return Status(Errc::kInvalidArgument, "damping-max: must be at least damping-suppress");
  if (mode == SourceMode::kNetlink && !rtnetlink)
    return Status(Errc::kInvalidArgument, "source: netlink mode needs the rtnetlink listener");
  if (bpf.retransRatePpm > 1'000'000)
    return Status(Errc::kInvalidArgument, "retrans-rate: must be 0..1000 per mille (RECCL_RETRANS_RATE)");
  if (bpf.retransPoolWindows > RECCL_RETRANS_POOL_MAX)
    return Status(Errc::kInvalidArgument,
                  "retrans-pool: must be 0.." + std::to_string(RECCL_RETRANS_POOL_MAX) + " windows (RECCL_RETRANS_POOL)");
  if (bpf.scanPeriodNs > 1'000'000'000)
    return Status(Errc::kInvalidArgument, "scan: must be 0..1000000 us (RECCL_DETECTOR_SCAN_US)");
  if (rdmaLoss.windowNs != 0 && (rdmaLoss.windowNs < 10'000'000 || rdmaLoss.windowNs > 60'000'000'000))
    return Status(Errc::kInvalidArgument, "rdma-loss-window: must be 0 or 10..60000 ms (RECCL_RDMA_LOSS_WINDOW_MS)");
  if (rdmaLoss.threshold == 0)
    return Status(Errc::kInvalidArgument, "rdma-loss-threshold: must be >= 1 (RECCL_RDMA_LOSS_THRESHOLD)");
  if (rdmaLoss.ratePpm > 1'000'000)
    return Status(Errc::kInvalidArgument, "rdma-loss-ppm: must be 0..1000000 (RECCL_RDMA_LOSS_PPM)");
  if (rdmaLoss.poolWindows > kRdmaLossPoolMax)
    return Status(Errc::kInvalidArgument,
                  "rdma-loss-pool: must be 0.." + std::to_string(kRdmaLossPoolMax) + " windows (RECCL_RDMA_LOSS_POOL)");
  if (queueLimit == 0) return Status(Errc::kInvalidArgument, "queue-limit: must be > 0");
  if (realtimePriority < 0 || realtimePriority > 99)
    return Status(Errc::kInvalidArgument, "realtime-priority: must be 0..99");
  return Status::Ok();
}

}  // namespace reccl::detector
