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
  // The last resort, in this order: after an in-band signal, the rail being left when it is up at
  // both ends as far as known (the fault may be the path's, not a rail's); a rail DEGRADED here
  // (it carries bytes); a rail up here that the peer last reported down (its word may be stale);
  // a rail declared down here (it may be back, held down by damping). A stall's move may have a
  // single attempt (failoverBudgetMs): spent on a rail down here it would fail a connection whose
  // own rail still works.
  const auto weight = [&](int r) { return r >= 0 && r < static_cast<int>(in.weights.size()) ? in.weights[r] : 0.0; };
  if (inBand && in.fromRail >= 0 && in.fromRail < nrails && !bit(in.tried, in.fromRail) &&
      bit(in.upHere, in.fromRail) && weight(in.fromRail) > 0) {
    out.rail = in.fromRail;
    return out;
  }
  std::vector<double> tiers[3] = {std::vector<double>(nrails, 0.0), std::vector<double>(nrails, 0.0),
                                  std::vector<double>(nrails, 0.0)};
  for (int r = 0; r < nrails; ++r) {
    if (bit(in.tried, r)) continue;
    if (r == in.fromRail && !(inBand && bit(in.upHere, r))) continue;
    tiers[bit(in.grayHere, r) ? 0 : bit(in.upHere, r) ? 1 : 2][r] = 1.0;
  }
  for (const auto& t : tiers)
    if ((out.rail = pickRail(in.load, t, -1)) >= 0) break;
  return out;
}

}  // namespace reccl::failover
