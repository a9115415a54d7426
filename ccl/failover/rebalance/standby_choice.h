// Where a connection's standby goes: pure, table-tested (tests/unit/failover/standby_choice_test.cpp).
// The standby upkeep judges every connection of a pass against one count of the table
// (StandbyLoads); counting the table anew for each connection made a pass quadratic in the
// connection count, on the monitor thread that also drives the failovers.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "failover/migration/migrate_wire.h"

namespace reccl::failover {

// What the count needs of one connection: its end, its rail, its standby's rail (-1: none).
struct ConnPlacement {
  Role role = Role::kSender;
  int rail = -1;
  int standbyTarget = -1;
};

class StandbyLoads {
 public:
  StandbyLoads(std::span<const ConnPlacement> conns, int nrails);
  // The loads c's standby is judged by: the connections of c's role per rail, plus the standbys
  // of the others of that role on c's rail (they move together when it fails); c's own standby
  // is not counted.
  std::vector<int> loadFor(const ConnPlacement& c) const;
  // A standby that went (retired during the pass): counted no more.
  void dropStandby(const ConnPlacement& c);

 private:
  static constexpr size_t kRoles = 2;
  int* standbyCount(const ConnPlacement& c);  // nullptr: c's standby is not counted
  int nrails_;
  std::array<std::vector<int>, kRoles> onRail_;    // [rail]
  std::array<std::vector<int>, kRoles> standbys_;  // [(rail + 1) * nrails + standby rail]; rail -1: none
};

struct StandbyChoice {
  int rail = -1;          // the lowest (load + 1) / weight over the usable rails other than c's; -1: none
  double scoreCost = 0;   // that cost of the rail asked about (0: not usable)
  double bestCost = 0;    // and of `rail`
};

// `weights`: the rails usable here and at c's peer (RailPicker::weights); c's own rail is never
// its standby's.
StandbyChoice chooseStandbyRail(const StandbyLoads& loads, const ConnPlacement& c, std::vector<double> weights,
                                int scoreRail = -1);

}  // namespace reccl::failover
