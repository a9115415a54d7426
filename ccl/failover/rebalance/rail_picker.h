// Rail choice for this rank's connections: rail weights from the measured throughput (RailMeter)
// of the rails usable at both ends, loads counted per direction, and the claims that spread
// connections moving at once (a move's target, a standby's rail) over the surviving rails.
// The decisions are pure (rebalance.h, move_choice.h); this holds the loads and the claims.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "failover/conn_table.h"
#include "failover/rebalance/move_choice.h"
#include "failover/rebalance/standby_choice.h"

namespace reccl::failover {

struct FailoverContext;

// Lock rule: mu_ is held while a rail is picked and claimed (Conn::movingTo, Conn::standbyTarget),
// so that two picks never count the loads before either claim; nothing else is taken under it
// but the connection table's own lock.
class RailPicker {
 public:
  explicit RailPicker(FailoverContext& ctx) : ctx_(ctx) {}

  // Weights of the rails usable here and, as far as known, at `peer` (weightsFromThroughput).
  std::vector<double> weights(int peer);
  // The rails to dial a new connection on, best first: `preferred` while usable at both ends,
  // else the least loaded one; then the other usable rails. Nothing usable: `preferred` alone
  // (the dial fails and reports it).
  std::vector<int> forNewConnection(int peer, int preferred);
  // One try of a move: chooseMoveRail with the loads of the moment, c's target claimed (not for a
  // fail-back, whose rail is its own).
  MoveChoice pickMove(Conn& c, MoveChoiceInput in);
  // A move over c's standby on `rail` claims the rail as a pick does.
  void claimMove(Conn& c, int rail);
  // The rail for c's standby (chooseStandbyRail): the lowest (load + 1) / weight over the usable
  // rails other than c's, where load counts the connections of c's role on each rail plus the
  // standbys of the others that share c's rail (they move together when it fails). With `score`:
  // that cost for `scoreRail` and for the best rail, instead (the standby upkeep's re-placement).
  // Call with lock() held when the result is claimed. Without `loads`, the table is counted now.
  int standbyRailFor(Conn& c, std::pair<double, double>* score = nullptr, int scoreRail = -1);
  int standbyRailFor(Conn& c, const StandbyLoads& loads, std::pair<double, double>* score = nullptr,
                     int scoreRail = -1);
  // One count of the table, for a pass that judges every connection's standby.
  StandbyLoads standbyLoads();
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }

 private:
  FailoverContext& ctx_;
  std::mutex mu_;
};

}  // namespace reccl::failover
