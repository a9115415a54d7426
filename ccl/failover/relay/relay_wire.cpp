#include "failover/relay/relay_wire.h"

#include <cstring>
#include <string>

#include "channel/wire_bytes.h"

namespace reccl::failover {
namespace {

using channel::get;
using channel::put;

Status bad(const std::string& what) { return Status(Errc::kProtocol, "relay " + what); }

}  // namespace

// Open: 0 magic | 4 version u16 | 6 rail u16 | 8 sender i32 | 12 receiver i32 | 16 channel u32 |
// 20 peer i32 | 24 zero.
void encodeRelayOpen(const RelayOpen& r, std::span<std::byte, kRelayOpenBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kRelayOpenBytes);
  put<uint32_t>(p, 0, kRelayOpenMagic);
  put<uint16_t>(p, 4, kRelayVersion);
  put<uint16_t>(p, 6, r.rail);
  put<int32_t>(p, 8, r.conn.sender);
  put<int32_t>(p, 12, r.conn.receiver);
  put<uint32_t>(p, 16, r.conn.channel);
  put<int32_t>(p, 20, r.peer);
}

Result<RelayOpen> decodeRelayOpen(std::span<const std::byte> in, int origin, int nranks) {
  if (in.size() != kRelayOpenBytes) return bad("request: wrong size " + std::to_string(in.size()));
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kRelayOpenMagic) return bad("request: bad magic");
  if (get<uint16_t>(p, 4) != kRelayVersion)
    return bad("request: version " + std::to_string(get<uint16_t>(p, 4)) + " unsupported");
  RelayOpen r;
  r.rail = get<uint16_t>(p, 6);
  r.conn.sender = get<int32_t>(p, 8);
  r.conn.receiver = get<int32_t>(p, 12);
  r.conn.channel = get<uint32_t>(p, 16);
  r.peer = get<int32_t>(p, 20);
  for (size_t i = 24; i < kRelayOpenBytes; ++i)
    if (p[i] != std::byte{0}) return bad("request: reserved bytes set");
  if (r.rail >= 64) return bad("request: rail " + std::to_string(r.rail) + " out of range");
  if (r.conn.channel >= 64) return bad("request: channel " + std::to_string(r.conn.channel) + " out of range");
  auto inRange = [&](int x) { return x >= 0 && x < nranks; };
  if (!inRange(r.conn.sender) || !inRange(r.conn.receiver) || !inRange(r.peer) || r.conn.sender == r.conn.receiver)
    return bad("request: bad ranks");
  bool originIsEnd = (r.conn.sender == origin && r.conn.receiver == r.peer) ||
                     (r.conn.receiver == origin && r.conn.sender == r.peer);
  if (!originIsEnd) return bad("request: the requesting rank is not an end of the connection");
  return r;
}

// Reply: 0 magic | 4 status u32 | 8 railsUp u64 | 16 zero.
void encodeRelayReply(const RelayReply& r, std::span<std::byte, kRelayReplyBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kRelayReplyBytes);
  put<uint32_t>(p, 0, kRelayReplyMagic);
  put<uint32_t>(p, 4, static_cast<uint32_t>(r.status));
  put<uint64_t>(p, 8, r.railsUp);
}

Result<RelayReply> decodeRelayReply(std::span<const std::byte> in) {
  if (in.size() != kRelayReplyBytes) return bad("reply: wrong size " + std::to_string(in.size()));
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kRelayReplyMagic) return bad("reply: bad magic");
  uint32_t st = get<uint32_t>(p, 4);
  if (st > 3) return bad("reply: unknown status " + std::to_string(st));
  RelayReply r;
  r.status = static_cast<RelayStatus>(st);
  r.railsUp = get<uint64_t>(p, 8);
  return r;
}

const char* relayStatusName(RelayStatus s) noexcept {
  switch (s) {
    case RelayStatus::kOk: return "ok";
    case RelayStatus::kRailDown: return "rail down at the relay";
    case RelayStatus::kConnectFailed: return "relay could not connect to the peer";
    case RelayStatus::kRefused: return "refused";
  }
  return "?";
}

}  // namespace reccl::failover
