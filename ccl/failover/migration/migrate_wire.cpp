#include "failover/migration/migrate_wire.h"

#include <cstring>
#include <string>

#include "channel/wire_bytes.h"

namespace reccl::failover {
namespace {

using channel::get;
using channel::put;

Status bad(const std::string& what) { return Status(Errc::kProtocol, "migration " + what); }

}  // namespace

const char* reasonName(MigrateReason r) noexcept {
  switch (r) {
    case MigrateReason::kLinkDown: return "link-down";
    case MigrateReason::kSocketError: return "socket-error";
    case MigrateReason::kStall: return "stall";
    case MigrateReason::kFailBack: return "fail-back";
    case MigrateReason::kRebalance: return "rebalance";
    case MigrateReason::kDegraded: return "degraded";
    case MigrateReason::kStandby: return "standby";
  }
  return "?";
}

bool isMoveAwayFromFault(MigrateReason r) noexcept {
  switch (r) {
    case MigrateReason::kLinkDown:
    case MigrateReason::kSocketError:
    case MigrateReason::kStall:
    case MigrateReason::kDegraded: return true;
    case MigrateReason::kFailBack:
    case MigrateReason::kRebalance:
    case MigrateReason::kStandby: return false;
  }
  return false;
}

// Request: 0 magic | 4 version u16 | 6 initiator u8 | 7 reason u8 | 8 sender i32 | 12 receiver i32 |
// 16 channel u32 | 20 epoch u32 | 24 received u64 | 32 applied u64 | 40 railsUp u64 | 48 rail u16 |
// 50 streamPath u8 | rest zero.
void encodeMigrateRequest(const MigrateRequest& r, std::span<std::byte, kMigrateRequestBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kMigrateRequestBytes);
  put<uint32_t>(p, 0, kMigrateMagic);
  put<uint16_t>(p, 4, kMigrateVersion);
  put<uint8_t>(p, 6, static_cast<uint8_t>(r.initiator));
  put<uint8_t>(p, 7, static_cast<uint8_t>(r.reason));
  put<int32_t>(p, 8, r.conn.sender);
  put<int32_t>(p, 12, r.conn.receiver);
  put<uint32_t>(p, 16, r.conn.channel);
  put<uint32_t>(p, 20, r.epoch);
  put<uint64_t>(p, 24, r.received);
  put<uint64_t>(p, 32, r.applied);
  put<uint64_t>(p, 40, r.railsUp);
  put<uint16_t>(p, 48, r.rail);
  put<uint8_t>(p, 50, r.streamPath ? 1 : 0);
}

Result<MigrateRequest> decodeMigrateRequest(std::span<const std::byte> in) {
  if (in.size() < kMigrateRequestBytes) return bad("request: short message");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kMigrateMagic) return bad("request: bad magic");
  if (get<uint16_t>(p, 4) != kMigrateVersion)
    return bad("request: version " + std::to_string(get<uint16_t>(p, 4)) + " unsupported");
  MigrateRequest r;
  uint8_t role = get<uint8_t>(p, 6);
  if (role > 1) return bad("request: unknown initiator role " + std::to_string(role));
  r.initiator = static_cast<Role>(role);
  uint8_t reason = get<uint8_t>(p, 7);
  if (reason < 1 || reason > 7) return bad("request: unknown reason " + std::to_string(reason));
  r.reason = static_cast<MigrateReason>(reason);
  r.conn.sender = get<int32_t>(p, 8);
  r.conn.receiver = get<int32_t>(p, 12);
  r.conn.channel = get<uint32_t>(p, 16);
  r.epoch = get<uint32_t>(p, 20);
  r.received = get<uint64_t>(p, 24);
  r.applied = get<uint64_t>(p, 32);
  r.railsUp = get<uint64_t>(p, 40);
  r.rail = get<uint16_t>(p, 48);
  uint8_t stream = get<uint8_t>(p, 50);
  if (stream > 1) return bad("request: stream-path flag " + std::to_string(stream) + " is not 0 or 1");
  r.streamPath = stream == 1;
  if (r.conn.sender < 0 || r.conn.receiver < 0 || r.conn.sender == r.conn.receiver)
    return bad("request: bad ranks " + std::to_string(r.conn.sender) + "->" + std::to_string(r.conn.receiver));
  if (r.conn.channel >= 64) return bad("request: channel " + std::to_string(r.conn.channel) + " out of range");
  if (r.epoch < 2) return bad("request: epoch " + std::to_string(r.epoch) + " is not a migration");
  if ((r.epoch & 1u) != (role == 1 ? 1u : 0u)) return bad("request: epoch parity does not match the initiator");
  if (r.applied > r.received) return bad("request: applied beyond received");
  if (r.rail >= 64) return bad("request: rail " + std::to_string(r.rail) + " out of range");
  if (r.streamPath && r.reason == MigrateReason::kStandby) return bad("request: a standby over a relay");
  for (size_t i = 51; i < kMigrateRequestBytes; ++i)
    if (p[i] != std::byte{0}) return bad("request: reserved bytes set");
  return r;
}

// Reply: 0 magic | 4 status u32 | 8 epoch u32 | 12 zero | 16 received u64 | 24 applied u64 |
// 32 railsUp u64 | 40 zero.
void encodeMigrateReply(const MigrateReply& r, std::span<std::byte, kMigrateReplyBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kMigrateReplyBytes);
  put<uint32_t>(p, 0, kMigrateReplyMagic);
  put<uint32_t>(p, 4, static_cast<uint32_t>(r.status));
  put<uint32_t>(p, 8, r.epoch);
  put<uint64_t>(p, 16, r.received);
  put<uint64_t>(p, 24, r.applied);
  put<uint64_t>(p, 32, r.railsUp);
}

Result<MigrateReply> decodeMigrateReply(std::span<const std::byte> in) {
  if (in.size() < kMigrateReplyBytes) return bad("reply: short message");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kMigrateReplyMagic) return bad("reply: bad magic");
  MigrateReply r;
  uint32_t st = get<uint32_t>(p, 4);
  if (st > static_cast<uint32_t>(MigrateStatus::kPeerFailed)) return bad("reply: unknown status " + std::to_string(st));
  r.status = static_cast<MigrateStatus>(st);
  r.epoch = get<uint32_t>(p, 8);
  r.received = get<uint64_t>(p, 16);
  r.applied = get<uint64_t>(p, 24);
  r.railsUp = get<uint64_t>(p, 32);
  if (r.applied > r.received) return bad("reply: applied beyond received");
  return r;
}

uint32_t nextEpoch(uint32_t highest, Role initiator) noexcept {
  uint32_t parity = initiator == Role::kReceiver ? 1u : 0u;
  uint32_t e = highest + 1;
  if ((e & 1u) != parity) ++e;
  return e;
}

}  // namespace reccl::failover
