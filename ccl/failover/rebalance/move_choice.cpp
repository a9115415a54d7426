#include "failover/rebalance/move_choice.h"

#include "failover/rebalance/rebalance.h"

namespace reccl::failover {

MoveChoice chooseMoveRail(const MoveChoiceInput& in) {
  const int nrails = static_cast<int>(in.weights.size());
  auto bit = [](uint64_t mask, int r) { return r >= 0 && r < 64 && ((mask >> r) & 1u); };
  MoveChoice out;
  if (in.reason == MigrateReason::kFailBack) {
    int r = in.toRail;
    if (r >= 0 && r < nrails && bit(in.upHere, r) && !bit(in.tried, r)) {
      out.rail = r;
      out.speculative = in.weights[r] <= 0;
    }
    return out;
  }
  std::vector<double> w = in.weights;
  for (int r = 0; r < nrails; ++r)
    if (bit(in.tried, r)) w[r] = 0;
  if (in.fromRail >= 0 && in.fromRail < nrails) w[in.fromRail] = 0;
  out.rail = pickRail(in.load, w, -1);
  if (out.rail >= 0) return out;
  if (in.reason == MigrateReason::kDegraded && in.currentRail == in.fromRail) {
    out.stay = true;
    return out;
  }
  const bool inBand = in.reason == MigrateReason::kStall || in.reason == MigrateReason::kSocketError;
  if (inBand && bit(in.grayHere, in.fromRail) && !bit(in.tried, in.fromRail) && in.fromRail < nrails) {
    out.rail = in.fromRail;  // before any rail declared down: a gray one carries bytes
    return out;
  }
  // The last resort: a rail up here first (the rail being left, after an in-band signal), then one
  // declared down. A stall's move may have a single attempt (failoverBudgetMs): spent on a rail
  // that is down here it would fail a connection whose own rail still works.
  std::vector<double> up(nrails, 0.0), down(nrails, 0.0);
  for (int r = 0; r < nrails; ++r) {
    if (bit(in.tried, r)) continue;
    if (r == in.fromRail && !(inBand && bit(in.upHere, r))) continue;
    (bit(in.upHere, r) ? up : down)[r] = 1.0;
  }
  out.rail = pickRail(in.load, up, -1);
  if (out.rail < 0) out.rail = pickRail(in.load, down, -1);
  return out;
}

}  // namespace reccl::failover
