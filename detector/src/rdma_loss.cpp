#include "reccl/detector/rdma_loss.h"

#include <net/if.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace reccl::detector {

uint64_t rdmaLossSampleNs(const RdmaLossParams& p) noexcept {
  return std::clamp<uint64_t>(p.windowNs / 10, 10'000'000, 100'000'000);
}

std::optional<RdmaLossJudge::Verdict> RdmaLossJudge::feed(uint64_t nowNs, uint64_t errors,
                                                          std::optional<uint64_t> packets) {
  if (!window_.empty()) {
    const Sample& last = window_.back();
    if (errors < last.errors || packets.has_value() != last.packets.has_value() ||
        (packets && *packets < *last.packets))
      window_.clear();
  }
  window_.push_back({nowNs, errors, packets});
  // The base is the oldest sample within the window.
  while (window_.size() > 1 && nowNs - window_.front().ns > p_.windowNs) window_.pop_front();
  if (window_.size() < 2) return std::nullopt;
  const Sample& base = window_.front();
  const uint64_t n = errors - base.errors;
  if (n < p_.threshold || n == 0) return std::nullopt;
  Verdict v;
  v.errors = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
  if (packets) {
    const uint64_t pk = *packets - *base.packets;
    const uint64_t ppm = pk == 0 ? 1'000'000 : std::min<uint64_t>(n * 1'000'000 / pk, 1'000'000);
    if (ppm < p_.ratePpm) return std::nullopt;
    v.ppm = static_cast<uint32_t>(ppm);
  }
  window_.clear();
  window_.push_back({nowNs, errors, packets});
  return v;
}

Result<std::unique_ptr<RdmaLossSource>> RdmaLossSource::open(const std::string& root, uint32_t ownNetnsIno,
                                                             RdmaLossParams params) {
  auto ports = listRdmaLossPorts(root);
  if (ports.empty())
    return Status(Errc::kUnsupported, "rdma counters: no RDMA port bound to a netdev counts sequence errors");
  std::unique_ptr<RdmaLossSource> s(new RdmaLossSource());
  s->netnsIno_ = ownNetnsIno;
  for (auto& c : ports) s->ports_.push_back({std::move(c), RdmaLossJudge(params)});
  s->timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!s->timer_) return Status::FromErrno(errno, "rdma counters: timerfd_create");
  const uint64_t ns = rdmaLossSampleNs(params);
  itimerspec its{};
  its.it_interval.tv_sec = static_cast<time_t>(ns / 1'000'000'000ull);
  its.it_interval.tv_nsec = static_cast<long>(ns % 1'000'000'000ull);
  its.it_value = its.it_interval;
  if (timerfd_settime(s->timer_.get(), 0, &its, nullptr) != 0)
    return Status::FromErrno(errno, "rdma counters: timerfd_settime");
  return s;
}

void RdmaLossSource::sample(uint64_t nowNs, const std::function<bool(LinkKey)>& watched,
                            std::vector<LinkSignal>& out) {
  uint64_t expirations;
  (void)!::read(timer_.get(), &expirations, sizeof(expirations));
  for (auto& p : ports_) {
    // By name, as the netdev is known in this namespace (rdma_async_source.h does the same).
    unsigned ifindex = if_nametoindex(p.counters.netdev.c_str());
    if (ifindex == 0 || !watched(LinkKey{netnsIno_, ifindex})) continue;
    auto errors = readCounterSum(p.counters.lossFiles);
    if (!errors) continue;
    std::optional<uint64_t> packets;
    if (!p.counters.packetFiles.empty()) {
      packets = readCounterSum(p.counters.packetFiles);
      if (!packets) continue;
    }
    auto v = p.judge.feed(nowNs, *errors, packets);
    if (!v) continue;
    LinkSignal s;
    s.kind = RECCL_LINK_KIND_DEGRADED;
    s.source = RECCL_LINK_SRC_RDMA_COUNTERS;
    s.tsNs = nowNs;
    s.link = {netnsIno_, ifindex};
    s.ifname = p.counters.netdev;
    s.value = (uint64_t(v->ppm) << 32) | v->errors;
    out.push_back(std::move(s));
  }
}

std::vector<std::string> RdmaLossSource::ports() const {
  std::vector<std::string> v;
  for (const auto& p : ports_)
    v.push_back(p.counters.dev + "/" + std::to_string(p.counters.port) + " (" + p.counters.netdev + ")");
  return v;
}

}  // namespace reccl::detector
