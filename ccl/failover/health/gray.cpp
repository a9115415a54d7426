#include "failover/health/gray.h"

namespace reccl::failover {

namespace {
bool within(const GrayFacts& f, uint64_t t) { return t != 0 && f.nowNs - t < f.windowNs; }
bool byAPeer(const GrayFacts& f) { return within(f, f.peerReportNs) || f.downAtAPeer; }
// The detector ignores retransmits while the link is down here, not those of the backed-off
// sockets that resume once it is back: this end's own fault explains them for a while too.
bool byThisEnd(const GrayFacts& f) { return within(f, f.leftNs) || within(f, f.upHereNs); }
}  // namespace

bool grayExplained(const GrayFacts& f) noexcept { return byAPeer(f) || byThisEnd(f); }

bool onlyAPeerExplainsGray(const GrayFacts& f) noexcept { return byAPeer(f) && !byThisEnd(f); }

bool heldGrayIsReal(uint64_t nowNs, uint64_t explainedNs, uint64_t clearNs) noexcept {
  return nowNs - explainedNs >= clearNs + 250'000'000ull;
}

}  // namespace reccl::failover
