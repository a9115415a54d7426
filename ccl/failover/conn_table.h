// The connection ends failover may move (network connections; shared-memory ones never move), as
// it tracks them: one Conn per (sender, receiver, channel) end of this rank, made when the
// communicator's port snapshot first shows it, kept until the failover goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "channel/port.h"
#include "failover/migration/job_slot.h"
#include "failover/migration/migrate_wire.h"
#include "transport/path_factory.h"

namespace reccl::failover {

struct FailoverContext;

// One directed connection as failover tracks it (either end). Fields are grouped by the part that
// writes them; every part may read the atomics.
struct Conn {
  // Identity, fixed.
  ConnId id;
  Role role = Role::kSender;  // this rank's end
  int peer = -1;
  channel::PortBase* port = nullptr;
  int preferredRail = 0;  // the rail it takes with every rail healthy (core::railFor)

  // Route (written by the commit under `mu`): where its path runs now.
  std::atomic<int> rail{0};
  std::atomic<int> relayVia{-1};  // the same-host rank forwarding it (relay/), -1: direct

  // Migration (migration/).
  std::atomic<int> busy{0};        // a handshake or commit of this connection is in progress here
  JobSlot jobs;                    // its jobs, one at a time (Migration::enqueue)
  std::mutex mu;                   // serializes commits (initiated and passive)
  uint32_t highest = 1;            // largest epoch used, proposed or seen (under mu)
  uint32_t pending = 0;            // own proposal in flight (under mu)
  // Epoch of the last path this end accepted from the peer's proposal: if the peer gave up on
  // that handshake (its reply deadline passed) it closes the path under us (Monitor::onPathFailure).
  std::atomic<uint32_t> passiveEpoch{0};
  // A handshake of ours failed after its request went out: the peer may have switched to that
  // path and closed the one we still use (Monitor::onPathFailure). Cleared by the next commit.
  std::atomic<bool> handshakeUnsure{false};
  // The path the last commit shut down (Migration::commit retires the old path before it makes
  // the new one) and when: still the port's path means that commit failed half-way and left the
  // connection on a path whose I/O has stopped, which no engine reports (Monitor::scanStalls).
  std::atomic<const channel::Path*> retired{nullptr};
  std::atomic<uint64_t> retiredNs{0};
  // The rail a failover without a standby is moving it to (-1: none): counted by the next pick
  // until the move is done (RailPicker), so that connections moving at once spread.
  std::atomic<int> movingTo{-1};

  // Standby (standby/): an idle, authenticated link to the peer on another rail, opened by this
  // end, so that a failover needs the handshake only. Under sbMu.
  std::mutex sbMu;
  std::unique_ptr<transport::Link> standby;
  int standbyRail = -1;
  uint64_t standbyRetryNs = 0;  // after a failed try, not before this (CLOCK_MONOTONIC)
  uint32_t standbyFailures = 0; // failed tries in a row since its last standby
  int standbyFailedRail = -1;   // the rail of the last of them
  uint32_t standbyBackoffStep = 0;  // of the back-off after them (a rail change here restarts it)
  uint32_t standbyRetryGen = 0; // bumped by Standbys::retryFailedNow: a try under way then retries at once
  // The rail of its standby, made or being made (-1: none). The connections that share a rail
  // land on their standbys together when it fails: the next standby's rail counts these
  // (RailPicker::standbyRailFor), so that they spread over the other rails.
  std::atomic<int> standbyTarget{-1};
  std::atomic<bool> standbyReplace{false};  // the next standby made replaces the one in place
  std::atomic<bool> standbyMaking{false};   // a standby job is queued or running
};

// Lock rule: mu_ guards conns_ and is never held while calling out (the communicator's port
// snapshot is taken before it). The walk of the communicator's ports only try_locks them.
class ConnTable {
 public:
  explicit ConnTable(FailoverContext& ctx) : ctx_(ctx) {}

  // Tracks the connections made since the last call; true when there were any. Cheap when none
  // were (the port count, two try_locks). Any thread; one found on a thread other than the
  // monitor's wakes the monitor (its stall check and standby upkeep start on it at once).
  bool refresh();
  // The tracked connection `id`, refreshing once when it is not (yet) tracked.
  std::shared_ptr<Conn> find(const ConnId& id);
  std::vector<std::shared_ptr<Conn>> snapshot();
  bool empty();
  // Connections per rail: all of this rank's, or those where this rank has `role` (the senders
  // load a NIC's transmit side, the receivers its receive side).
  std::vector<int> loads(std::optional<Role> role = std::nullopt);
  // Monitor thread: true once after refresh() tracked new connections.
  bool takeAdded() noexcept { return added_.exchange(false, std::memory_order_acq_rel); }

 private:
  FailoverContext& ctx_;
  std::atomic<size_t> portsSeen_{0};  // ports (every kind) at the last complete walk
  std::atomic<bool> added_{false};
  std::mutex mu_;
  std::map<ConnId, std::shared_ptr<Conn>> conns_;  // under mu_
};

}  // namespace reccl::failover
