// The migration handshake: what travels on a freshly opened path after the usual 128-byte hello
// (which already proves job secret, communicator and ranks). Pure functions over byte spans,
// fuzzable and unit-tested (tests/unit/failover/). Little-endian, fixed sizes.
//
// A directed connection is named by (sender, receiver, channel). Either end may open the new path
// (the end that saw the fault: bilateral awareness, a last-hop fault is invisible from the far
// end). The request carries the proposed epoch and, when the receiver opens it, the receiver's
// counters; the reply carries the receiver's counters when the sender opened it. The sender then
// resends from received + 1 out of its slots; the receiver drops anything <= received by step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "reccl/common/status.h"

namespace reccl::failover {

inline constexpr uint32_t kMigrateMagic = 0x47494d52;       // "RMIG"
inline constexpr uint32_t kMigrateReplyMagic = 0x504c4d52;  // "RMLP"
inline constexpr uint16_t kMigrateVersion = 1;
inline constexpr size_t kMigrateRequestBytes = 64;
inline constexpr size_t kMigrateReplyBytes = 48;

enum class Role : uint8_t { kSender = 0, kReceiver = 1 };

struct ConnId {
  int32_t sender = -1;
  int32_t receiver = -1;
  uint32_t channel = 0;
  bool operator==(const ConnId&) const = default;
  auto operator<=>(const ConnId&) const = default;
};

// "rank S->R ch C", as every failover log line names a connection.
inline std::string connName(const ConnId& c) {
  return "rank " + std::to_string(c.sender) + "->" + std::to_string(c.receiver) + " ch " + std::to_string(c.channel);
}

// kDegraded: a gray failure (the detector's retransmit rate, TX timeout) routed around like a dead link.
enum class MigrateReason : uint8_t {
  kLinkDown = 1,
  kSocketError = 2,
  kStall = 3,
  kFailBack = 4,
  kRebalance = 5,
  kDegraded = 6,
  // Not a migration: opens an idle standby path for the connection (migration/, standby/).
  // The request's epoch is a placeholder of the initiator's parity; nothing is committed.
  kStandby = 7,
};
const char* reasonName(MigrateReason r) noexcept;
// A move away from a fault (link down, socket error, stall, degraded link), not a fail-back, a
// rebalance or a standby: what the fault-move stamps count (recclCommStats_t.lastFaultMove*).
bool isMoveAwayFromFault(MigrateReason r) noexcept;

struct MigrateRequest {
  ConnId conn;
  Role initiator = Role::kSender;  // which end of the connection opened this path
  MigrateReason reason = MigrateReason::kLinkDown;
  uint16_t rail = 0;               // rail index of the new path (same on both hosts)
  uint32_t epoch = 0;              // proposed epoch of the new path
  uint64_t received = 0;           // receiver-initiated: steps the receiver holds
  uint64_t applied = 0;            // receiver-initiated: steps the receiver applied (acked)
  uint64_t railsUp = 0;            // initiator's healthy rails (bit per rail)
  // The passive end makes a byte-stream path (TCP), whatever the communicator's transport: the
  // initiator's end is a relay pipe, whose relay forwards bytes (transport::Link::needsStreamPeer).
  bool streamPath = false;
};

enum class MigrateStatus : uint32_t {
  kOk = 0,
  kStale = 1,     // this side already holds (or proposed) a newer epoch; reply.epoch says which
  kNotReady = 2,  // the connection does not exist here yet; try again
  // A malformed or mismatched request, a fail-back onto a rail not up here, or standby paths off
  // here.
  kRefused = 3,
  // This side's communicator failed: no path or retry can help, and the initiator fails at once
  // instead of trying other rails until RECCL_FAILOVER_TIMEOUT_MS.
  kPeerFailed = 4,
};

struct MigrateReply {
  MigrateStatus status = MigrateStatus::kOk;
  uint32_t epoch = 0;     // the epoch now in force on the replying side
  uint64_t received = 0;  // sender-initiated: the receiver's counters
  uint64_t applied = 0;
  uint64_t railsUp = 0;
};

void encodeMigrateRequest(const MigrateRequest& r, std::span<std::byte, kMigrateRequestBytes> out) noexcept;
// Syntax: magic, version, role/reason ranges, applied <= received.
Result<MigrateRequest> decodeMigrateRequest(std::span<const std::byte> in);
void encodeMigrateReply(const MigrateReply& r, std::span<std::byte, kMigrateReplyBytes> out) noexcept;
Result<MigrateReply> decodeMigrateReply(std::span<const std::byte> in);

// Epochs are split by initiator so that two ends proposing at the same moment never propose the
// same number: sender-opened paths get even epochs, receiver-opened ones odd (the first path is 1).
// Returns the smallest epoch of the initiator's parity above `highest` (the largest epoch this
// end has used, proposed or seen).
uint32_t nextEpoch(uint32_t highest, Role initiator) noexcept;
// The passive end accepts a proposal only if it is above both the epoch in force and any
// proposal of its own still in flight; the larger proposal wins everywhere.
inline bool acceptProposal(uint32_t proposed, uint32_t current, uint32_t ownPending) noexcept {
  return proposed > current && proposed > ownPending;
}

}  // namespace reccl::failover
