// Which rail a connection moves to in one try of a migration job: pure, table-tested
// (tests/unit/failover/move_choice_test.cpp). The migrator applies it under the rail picker's
// lock with the loads of the moment (rail_picker.h).
#pragma once

#include <cstdint>
#include <vector>

#include "failover/migration/migrate_wire.h"

namespace reccl::failover {

struct MoveChoiceInput {
  MigrateReason reason = MigrateReason::kLinkDown;
  int fromRail = -1;     // the rail being left (-1: any)
  int toRail = -1;       // a fail-back's target
  int currentRail = -1;  // where the connection is now
  uint64_t upHere = 0;   // rails up at this end
  uint64_t grayHere = 0; // rails out at this end for DEGRADED alone (not in upHere)
  uint64_t tried = 0;    // rails this job already failed on
  // Rail weights (measured throughput; 0: not usable here or, as far as known, at the peer) and
  // the connections of the moving one's direction per rail, moves in flight included.
  std::vector<double> weights;
  std::vector<int> load;
};

struct MoveChoice {
  int rail = -1;             // -1: no rail now (a rail may come back before the deadline)
  bool stay = false;         // a DEGRADED rail with nowhere to go: stay on it
  bool speculative = false;  // a fail-back onto a rail the peer last reported down: try briefly
};

// A fail-back goes to its own rail when that is up here and not tried yet, whatever the peer last
// said (its word may be stale: the handshake settles it). Anything else: the least loaded usable
// rail by weight, never the rail being left or one tried; a DEGRADED rail with no healthy rail to
// go to keeps its connections (a gray rail still carries bytes), and a stall or socket error on
// such a rail with nowhere to go reconnects on it (the loss's retransmit backoff can outlast the
// stall time, and a new connection either carries on or fails, so a dead path still ends the
// job within the failover timeout); else, as a last resort, any rail
// not tried, also one declared down (it may be up again and held down by damping), and the rail
// being left only after an in-band signal (a stall or socket error says nothing certain about
// this end's NIC) while it is up here; among those, the rail being left first when it is up at
// both ends, then a rail DEGRADED here, then one up here that the peer reported down, then one
// declared down here.
MoveChoice chooseMoveRail(const MoveChoiceInput& in);

}  // namespace reccl::failover
