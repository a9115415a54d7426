#include "failover/rebalance/standby_choice.h"

#include "failover/rebalance/rebalance.h"

namespace reccl::failover {

StandbyLoads::StandbyLoads(std::span<const ConnPlacement> conns, int nrails) : nrails_(nrails) {
  for (size_t r = 0; r < kRoles; ++r) {
    onRail_[r].assign(static_cast<size_t>(nrails), 0);
    standbys_[r].assign(static_cast<size_t>(nrails + 1) * static_cast<size_t>(nrails), 0);
  }
  for (const ConnPlacement& c : conns) {
    auto role = static_cast<size_t>(c.role);
    if (role >= kRoles) continue;
    if (c.rail >= 0 && c.rail < nrails) ++onRail_[role][static_cast<size_t>(c.rail)];
    if (int* n = standbyCount(c)) ++*n;
  }
}

int* StandbyLoads::standbyCount(const ConnPlacement& c) {
  auto role = static_cast<size_t>(c.role);
  if (role >= kRoles || c.rail < -1 || c.rail >= nrails_ || c.standbyTarget < 0 || c.standbyTarget >= nrails_)
    return nullptr;
  return &standbys_[role][static_cast<size_t>((c.rail + 1) * nrails_ + c.standbyTarget)];
}

void StandbyLoads::dropStandby(const ConnPlacement& c) {
  if (int* n = standbyCount(c); n && *n > 0) --*n;
}

std::vector<int> StandbyLoads::loadFor(const ConnPlacement& c) const {
  auto role = static_cast<size_t>(c.role);
  if (role >= kRoles) return std::vector<int>(static_cast<size_t>(nrails_), 0);
  std::vector<int> load = onRail_[role];
  if (c.rail < -1 || c.rail >= nrails_) return load;
  const int* sb = &standbys_[role][static_cast<size_t>((c.rail + 1) * nrails_)];
  for (int t = 0; t < nrails_; ++t) load[static_cast<size_t>(t)] += sb[t];
  // Never below zero: a standby job may have moved c's standby since the count.
  if (c.standbyTarget >= 0 && c.standbyTarget < nrails_ && load[static_cast<size_t>(c.standbyTarget)] > 0)
    --load[static_cast<size_t>(c.standbyTarget)];
  return load;
}

StandbyChoice chooseStandbyRail(const StandbyLoads& loads, const ConnPlacement& c, std::vector<double> weights,
                                int scoreRail) {
  const int nrails = static_cast<int>(weights.size());
  if (c.rail >= 0 && c.rail < nrails) weights[static_cast<size_t>(c.rail)] = 0;
  std::vector<int> load = loads.loadFor(c);
  load.resize(weights.size(), 0);
  StandbyChoice out;
  out.rail = pickRail(load, weights, -1);
  auto cost = [&](int r) {
    return r >= 0 && r < nrails && weights[static_cast<size_t>(r)] > 0
               ? (load[static_cast<size_t>(r)] + 1) / weights[static_cast<size_t>(r)]
               : 0.0;
  };
  out.scoreCost = cost(scoreRail);
  out.bestCost = cost(out.rail);
  return out;
}

}  // namespace reccl::failover
