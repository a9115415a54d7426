#include "failover/rebalance/rail_picker.h"

#include "failover/context.h"
#include "failover/rebalance/rail_meter.h"
#include "failover/rebalance/rebalance.h"

namespace reccl::failover {

std::vector<double> RailPicker::weights(int peer) {
  // Weights from the measured throughput of each rail (rail_meter.h); a rail must be up here and,
  // as far as this rank knows, at the peer.
  uint64_t both = ctx_.rails.upMask() & ctx_.rails.peerRails(peer);
  return weightsFromThroughput(ctx_.meter->measuredBps(), both);
}

std::vector<int> RailPicker::forNewConnection(int peer, int preferred) {
  auto w = weights(peer);
  int first = preferred >= 0 && preferred < ctx_.cfg.nrails && w[preferred] > 0 ? preferred
                                                                                : pickRail(ctx_.conns.loads(), w, -1);
  if (first < 0) return {preferred};
  std::vector<int> rails{first};
  for (int r = 0; r < ctx_.cfg.nrails; ++r)
    if (r != first && w[r] > 0) rails.push_back(r);
  return rails;
}

MoveChoice RailPicker::pickMove(Conn& c, MoveChoiceInput in) {
  if (in.reason == MigrateReason::kFailBack) return chooseMoveRail(in);  // its own rail: nothing to claim
  const int nrails = ctx_.cfg.nrails;
  std::lock_guard lk(mu_);
  in.load = ctx_.conns.loads(c.role);
  for (auto& d : ctx_.conns.snapshot()) {
    if (d.get() == &c || d->role != c.role) continue;
    int t = d->movingTo.load();
    if (t >= 0 && t < nrails && t != d->rail.load()) ++in.load[t];
  }
  MoveChoice m = chooseMoveRail(in);
  c.movingTo.store(m.rail);
  return m;
}

void RailPicker::claimMove(Conn& c, int rail) {
  std::lock_guard lk(mu_);
  c.movingTo.store(rail);
}

StandbyLoads RailPicker::standbyLoads() {
  auto conns = ctx_.conns.snapshot();
  std::vector<ConnPlacement> placed;
  placed.reserve(conns.size());
  for (auto& d : conns) placed.push_back({d->role, d->rail.load(), d->standbyTarget.load()});
  return StandbyLoads(placed, ctx_.cfg.nrails);
}

int RailPicker::standbyRailFor(Conn& c, std::pair<double, double>* score, int scoreRail) {
  return standbyRailFor(c, standbyLoads(), score, scoreRail);
}

int RailPicker::standbyRailFor(Conn& c, const StandbyLoads& loads, std::pair<double, double>* score, int scoreRail) {
  StandbyChoice choice =
      chooseStandbyRail(loads, {c.role, c.rail.load(), c.standbyTarget.load()}, weights(c.peer), scoreRail);
  if (score) *score = {choice.scoreCost, choice.bestCost};
  return choice.rail;
}

}  // namespace reccl::failover
