#include "transport/verbs/conn_info.h"

#include <arpa/inet.h>

#include <cstring>

#include "channel/wire_bytes.h"

namespace reccl::transport::verbs {

using channel::get;
using channel::put;

// Layout: 0 magic u32 | 4 version u16 | 6 role u8 | 7 mtu u8 | 8 rail u16 | 10 lid u16 |
// 12 qpn u32 | 16 psn u32 | 20 epoch u32 | 24 gid[16] | 40 addr u64 | 48 rkey u32 |
// 52 slots u32 | 56 chunkBytes u64.
void encodeConnInfo(const ConnInfo& c, std::span<std::byte, kConnInfoBytes> out) noexcept {
  std::byte* p = out.data();
  std::memset(p, 0, kConnInfoBytes);
  put<uint32_t>(p, 0, kConnInfoMagic);
  put<uint16_t>(p, 4, kConnInfoVersion);
  put<uint8_t>(p, 6, static_cast<uint8_t>(c.role));
  put<uint8_t>(p, 7, c.mtu);
  put<uint16_t>(p, 8, c.rail);
  put<uint16_t>(p, 10, c.lid);
  put<uint32_t>(p, 12, c.qpn);
  put<uint32_t>(p, 16, c.psn);
  put<uint32_t>(p, 20, c.epoch);
  std::memcpy(p + 24, c.gid.data(), c.gid.size());
  put<uint64_t>(p, 40, c.addr);
  put<uint32_t>(p, 48, c.rkey);
  put<uint32_t>(p, 52, c.slots);
  put<uint64_t>(p, 56, c.chunkBytes);
}

Result<ConnInfo> decodeConnInfo(std::span<const std::byte> in) {
  auto bad = [](const std::string& what) { return Status(Errc::kProtocol, "verbs connection info: " + what); };
  if (in.size() < kConnInfoBytes) return bad("short record of " + std::to_string(in.size()) + " bytes");
  const std::byte* p = in.data();
  if (get<uint32_t>(p, 0) != kConnInfoMagic) return bad("bad magic");
  if (uint16_t v = get<uint16_t>(p, 4); v != kConnInfoVersion) return bad("unsupported version " + std::to_string(v));
  ConnInfo c;
  uint8_t role = get<uint8_t>(p, 6);
  if (role != static_cast<uint8_t>(ConnRole::kSender) && role != static_cast<uint8_t>(ConnRole::kReceiver))
    return bad("unknown role " + std::to_string(role));
  c.role = static_cast<ConnRole>(role);
  c.mtu = get<uint8_t>(p, 7);
  if (c.mtu < 1 || c.mtu > 5) return bad("mtu code " + std::to_string(c.mtu) + " outside 1..5");
  c.rail = get<uint16_t>(p, 8);
  c.lid = get<uint16_t>(p, 10);
  c.qpn = get<uint32_t>(p, 12);
  if (c.qpn > 0xffffff || c.qpn < 2) return bad("qpn " + std::to_string(c.qpn) + " is not a 24-bit RC QP number");
  c.psn = get<uint32_t>(p, 16);
  if (c.psn > 0xffffff) return bad("psn " + std::to_string(c.psn) + " over 24 bits");
  c.epoch = get<uint32_t>(p, 20);
  std::memcpy(c.gid.data(), p + 24, c.gid.size());
  c.addr = get<uint64_t>(p, 40);
  if (c.addr == 0) return bad("null address");
  c.rkey = get<uint32_t>(p, 48);
  c.slots = get<uint32_t>(p, 52);
  if (c.slots == 0) return bad("zero slots");
  c.chunkBytes = get<uint64_t>(p, 56);
  if (c.chunkBytes == 0) return bad("zero chunk bytes");
  return c;
}

Status checkPeerInfo(const ConnInfo& mine, const ConnInfo& peer) {
  auto differ = [](const std::string& what) { return Status(Errc::kProtocol, "verbs peer: " + what); };
  if (peer.role == mine.role) return differ("both ends claim the same role");
  if (peer.rail != mine.rail)
    return differ("rail " + std::to_string(peer.rail) + " on the peer, " + std::to_string(mine.rail) + " here");
  if (peer.slots != mine.slots)
    return differ(std::to_string(peer.slots) + " slots on the peer, " + std::to_string(mine.slots) + " here");
  if (peer.chunkBytes != mine.chunkBytes)
    return differ("chunk of " + std::to_string(peer.chunkBytes) + " bytes on the peer, " +
                  std::to_string(mine.chunkBytes) + " here");
  return Status::Ok();
}

std::string describeConnInfo(const ConnInfo& c) {
  char gid[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, c.gid.data(), gid, sizeof(gid));
  char buf[160];
  snprintf(buf, sizeof(buf), "%s qpn 0x%x psn 0x%x gid %s rail %u epoch %u", c.role == ConnRole::kSender ? "sender" : "receiver",
           c.qpn, c.psn, gid, c.rail, c.epoch);
  return buf;
}

}  // namespace reccl::transport::verbs
