// The relay route (RECCL_FAILOVER_ROUTE): a connection whose rail failed here is forwarded through
// a same-host rank's NIC. This rank (the origin) keeps its end of the connection; its path becomes
// a shared-memory pipe to the relay rank, which copies the bytes unchanged to and from a TCP
// connection from its own NIC to the peer's (relay_server.h). The peer sees an ordinary migration
// of the connection (the origin's hello and MigrateRequest travel through the pipe), so the
// epoch/step handshake, resend from slots and duplicate drops are the direct route's, end to end.
// Every rank with a same-host peer also serves relays for the others (its RelayServer).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "failover/conn_table.h"
#include "failover/migration/job.h"
#include "failover/relay/relay_server.h"
#include "reccl/common/deadline.h"
#include "reccl/common/status.h"

namespace reccl::failover {

struct FailoverContext;

class RelayRoute {
 public:
  explicit RelayRoute(FailoverContext& ctx) : ctx_(ctx) {}
  ~RelayRoute();
  // The route policy, and this rank's relay server when it has same-host peers.
  Status start();
  // Own relayed paths first (their relays then drop the peer connections), then waits for the
  // same-host ranks this rank forwards for: their last steps may still be passing through.
  void stop() noexcept;

  enum class Outcome { kDone, kStale, kFallBack };
  // Tries the relay route for one migration job; kFallBack: use the direct route.
  Outcome first(Conn& c, const Job& j, Deadline deadline);
  // The policy asks for the relay route for this job (first() tries it).
  bool wanted(const Conn& c, const Job& j);
  // This rank's NIC on `rail` went down: the pipes it forwards over the rail break.
  void railDown(int rail);
  uint64_t bytesForwarded() const { return server_ ? server_->bytesForwarded() : 0; }
  uint64_t pipesServed() const { return server_ ? server_->pipesServed() : 0; }

 private:
  std::vector<std::pair<int, int>> candidates(const Conn& c, const Job& j);  // (relay rank, rail)
  Attempt attempt(Conn& c, int via, int rail, const Job& j, Deadline deadline, Status* err, Moved* moved);

  FailoverContext& ctx_;
  std::unique_ptr<RelayServer> server_;
  bool stopped_ = false;
};

}  // namespace reccl::failover
