#include "failover/health/gray.h"

namespace reccl::failover {

bool grayExplained(const GrayFacts& f) noexcept {
  auto within = [&](uint64_t t) { return t != 0 && f.nowNs - t < f.windowNs; };
  // The detector ignores retransmits while the link is down here, not those of the backed-off
  // sockets that resume once it is back: this end's own fault explains them for a while too.
  return within(f.peerReportNs) || within(f.leftNs) || within(f.upHereNs) || f.downAtAPeer;
}

bool heldGrayIsReal(uint64_t nowNs, uint64_t explainedNs, uint64_t clearNs) noexcept {
  return nowNs - explainedNs >= clearNs + 250'000'000ull;
}

}  // namespace reccl::failover
