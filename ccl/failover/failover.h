// Failover for one communicator: its parts (context.h lists them), started with the communicator
// and stopped before its engine. The communicator sees only core::FailoverPart; failover sees only
// core::FailoverHost and the transport's path factory.
//
// What it does: a monitor thread learns of path faults (the link detector, the node daemon or the
// NIC poll; socket errors the transports report through the path-failure hook; paths without an
// answer for RECCL_STALL_TIMEOUT_MS) and moves every connection on a failed rail to a healthy one
// without the algorithms noticing: the end that sees the fault takes the connection's standby, or
// asks the transport for a link on another rail to the peer's NIC on that rail, runs the
// migration handshake on it ({epoch, receiver's step} both ways), and the sender resends from the
// receiver's step out of its slots; the receiver drops duplicates by step and stale frames by
// epoch. Both directions of a peer pair move (each connection is migrated by whichever end
// detects first; the larger epoch wins when both do). No rail to the peer within
// RECCL_FAILOVER_TIMEOUT_MS of the fault: the communicator fails with a network error.
#pragma once

#include <memory>

#include "core/failover_part.h"

namespace reccl::failover {

struct FailoverContext;
class Monitor;
class Migration;
class Standbys;
class RelayRoute;
class RailPicker;
class RailMeter;

class Failover final : public core::FailoverPart {
 public:
  static Result<std::unique_ptr<Failover>> create(core::FailoverHost& host);
  ~Failover() override;
  Failover(const Failover&) = delete;
  Failover& operator=(const Failover&) = delete;

  Status onMigrationHello(UniqueFd fd, const core::Hello& h) override;
  NewConnectionRails railsForNewConnection(int peer, int preferred) override;
  void fillStats(core::CommStats* s) const override;
  // The path-failure hook comes out first (no path thread is inside it or enters it once that
  // returns), then the relays drain, then every thread is woken and joined.
  void stop() noexcept override;

 private:
  Failover() = default;
  Status start(core::FailoverHost& host);

  bool stopped_ = false;
  std::unique_ptr<FailoverContext> ctx_;
  std::unique_ptr<RailMeter> meter_;
  std::unique_ptr<RailPicker> picker_;
  std::unique_ptr<RelayRoute> relay_;
  std::unique_ptr<Migration> migration_;
  std::unique_ptr<Standbys> standbys_;
  std::unique_ptr<Monitor> monitor_;
};

// The maker the api layer hands the communicator (core::CommOptions::makeFailover).
Result<std::unique_ptr<core::FailoverPart>> makeFailover(core::FailoverHost& host);

}  // namespace reccl::failover
