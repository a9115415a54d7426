// The relay request: what a rank sends a same-host rank over the relay control socket (after the
// usual 128-byte hello, which proves job secret and communicator) to have one of its connections
// forwarded, and the answer. Pure functions over byte spans (unit-tested with mutated inputs).
// Little-endian, fixed sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "failover/migration/migrate_wire.h"
#include "reccl/common/status.h"

namespace reccl::failover {

inline constexpr uint32_t kRelayOpenMagic = 0x504f5252;   // "RROP"
inline constexpr uint32_t kRelayReplyMagic = 0x50525252;  // "RRRP"
inline constexpr uint16_t kRelayVersion = 1;
inline constexpr size_t kRelayOpenBytes = 32;
inline constexpr size_t kRelayReplyBytes = 24;

struct RelayOpen {
  ConnId conn;        // the connection to forward (the origin is one end of it)
  int32_t peer = -1;  // its other end: the relay connects to this rank
  uint16_t rail = 0;  // from the relay's NIC on this rail to the peer's NIC on the same rail
};

enum class RelayStatus : uint32_t {
  kOk = 0,
  kRailDown = 1,     // the relay's NIC on that rail is not healthy
  kConnectFailed = 2,
  kRefused = 3,      // malformed, not same host, communicator failed
};

struct RelayReply {
  RelayStatus status = RelayStatus::kOk;
  uint64_t railsUp = 0;  // the relay's healthy rails
};

void encodeRelayOpen(const RelayOpen& r, std::span<std::byte, kRelayOpenBytes> out) noexcept;
// Syntax: magic, version, ranks and rail in range, origin one end of the connection, peer the other.
Result<RelayOpen> decodeRelayOpen(std::span<const std::byte> in, int origin, int nranks);
void encodeRelayReply(const RelayReply& r, std::span<std::byte, kRelayReplyBytes> out) noexcept;
Result<RelayReply> decodeRelayReply(std::span<const std::byte> in);
const char* relayStatusName(RelayStatus s) noexcept;

}  // namespace reccl::failover
