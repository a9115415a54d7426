// The failover part of a communicator, as the communicator sees it. ccl/failover implements it
// (failover::makeFailover); the api layer hands the maker to the communicator
// (CommOptions::makeFailover), so the library dependency runs one way: failover -> core.
// Comparable to NCCL's plugin tables: the communicator calls these and nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/comm_stats.h"
#include "core/failover_host.h"
#include "core/wire.h"
#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::core {

// The data listener's test: a data hello with a migration epoch (> 1) opens a replacement path
// for an existing connection (or a standby), not a new connection.
inline bool isMigrationHello(const Hello& h) noexcept { return h.kind == HelloKind::kTcpData && h.epoch > 1; }

class FailoverPart {
 public:
  virtual ~FailoverPart() = default;
  // A connection the data listener accepted and authenticated whose hello isMigrationHello.
  virtual Status onMigrationHello(UniqueFd fd, const Hello& h) = 0;
  // The rails to dial a new connection to `peer` on, best first: `preferred` while healthy at
  // both ends, then the others healthy as far as this rank knows. A rail down only at the peer's
  // end is known to nobody here: a dial unanswered for `perRailMs` gives way to the next rail.
  struct NewConnectionRails {
    std::vector<int> rails;
    int64_t perRailMs = 0;
  };
  virtual NewConnectionRails railsForNewConnection(int peer, int preferred) = 0;
  virtual void fillStats(CommStats* s) const = 0;
  // Stops every thread of the part and removes its hook. Once it returns nothing of the part
  // runs or is called any more; the communicator then stops its engine and frees its ports.
  // Idempotent; the destructor calls it too.
  virtual void stop() noexcept = 0;
};

// Starts the failover part of a communicator (host outlives it).
using FailoverMaker = std::function<Result<std::unique_ptr<FailoverPart>>(FailoverHost& host)>;

}  // namespace reccl::core
