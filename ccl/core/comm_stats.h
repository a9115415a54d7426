// A communicator's counters (recclCommGetStats): the communicator fills its own, its failover
// part (core/failover_part.h) the rest.
#pragma once

#include <cstdint>
#include <string>

namespace reccl::core {

struct CommStats {
  uint64_t collectives = 0;
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  uint64_t duplicateSteps = 0;
  uint32_t railsTotal = 0;
  // Filled by the failover part (ccl/failover/).
  uint64_t failovers = 0;
  uint64_t failbacks = 0;
  uint64_t bytesResent = 0;
  uint64_t lastFailoverUs = 0;
  uint32_t railsUp = 0;
  uint64_t lastFailoverSignalNs = 0;
  uint64_t lastMigrationFirstStepNs = 0;  // from PortEnv (the ports stamp it)
  uint64_t lastMigrationResumeNs = 0;     // from PortEnv (the send ports stamp it)
  uint64_t lastFaultMoveFirstStepNs = 0;  // the two, over moves away from a fault only
  uint64_t lastFaultMoveResumeNs = 0;
  uint64_t relayMigrations = 0;      // this rank's connections moved onto a same-host relay
  uint64_t relayBytesForwarded = 0;  // bytes this rank forwarded for same-host ranks
  uint64_t relayPipesServed = 0;
  uint64_t standbyFailovers = 0;     // failovers initiated over a pre-connected standby path
  uint32_t faultSource = 0;     // recclFaultSource_t (0: no failover)
  std::string faultSourceName = "none";
  bool faultSourceStarting = false;  // the in-process detector still loading (off the monitor)
  uint64_t lostConnections = 0;      // from PortEnv: ports lost for good (PortBase::lose)
  int32_t firstLostPeer = -1;
};

}  // namespace reccl::core
