#include "failover/rebalance/fail_back_pacing.h"

#include <algorithm>

namespace reccl::failover {

uint64_t failBackRetryWaitNs(int tries) {
  return std::min(kFailBackRetryFirstNs << std::clamp(tries, 0, 6), kFailBackRetryMaxNs);
}

bool carriesHoldLets(CarriesHold& h, uint64_t nowNs) {
  if (h.lastNs && nowNs - h.lastNs < h.holdNs) return false;
  // Quiet: a whole window past the end of the hold (measured from the hold's start, a hold at the
  // cap would never outlast the window and the cap would clear itself).
  h.holdNs = h.lastNs && nowNs - h.lastNs < h.holdNs + kCarriesWindowNs
                 ? std::min(std::max(kCarriesHoldFirstNs, 2 * h.holdNs), kCarriesHoldMaxNs)
                 : 0;
  h.lastNs = nowNs;
  return true;
}

}  // namespace reccl::failover
