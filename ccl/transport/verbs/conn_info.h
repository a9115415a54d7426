// What one end of a verbs connection tells the other before its QP can connect: the QP's number
// and first packet sequence number, the port's address (GID, or LID on InfiniBand), and where the
// peer's RDMA writes go (a receiver's slot ring, a sender's ack word) with the key that lets them.
// Exchanged over the bootstrap's side channel; pure functions over byte spans (fuzzed in
// tests/unit/ccl/fuzz_verbs_conn_info.cpp). Little-endian, 64 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "reccl/common/status.h"

namespace reccl::transport::verbs {

inline constexpr uint32_t kConnInfoMagic = 0x49435652;  // "RVCI"
inline constexpr uint16_t kConnInfoVersion = 1;
inline constexpr size_t kConnInfoBytes = 64;

enum class ConnRole : uint8_t { kSender = 1, kReceiver = 2 };

struct ConnInfo {
  ConnRole role = ConnRole::kSender;
  uint8_t mtu = 0;        // the port's active MTU as enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint16_t rail = 0;
  uint16_t lid = 0;       // InfiniBand: the port's LID; RoCE: 0 (routed by GID)
  uint32_t qpn = 0;       // 24 bits
  uint32_t psn = 0;       // 24 bits: the first packet sequence number this end sends
  uint32_t epoch = 0;     // the connection's path generation when this QP was made
  std::array<uint8_t, 16> gid{};
  // Receiver: address of its first slot (the ring the sender writes steps into). Sender: address
  // of its ack word (AckMode::kWrite).
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t slots = 0;     // ring geometry, so a mismatch is refused before any write lands
  uint64_t chunkBytes = 0;
  bool operator==(const ConnInfo&) const = default;
};

void encodeConnInfo(const ConnInfo& c, std::span<std::byte, kConnInfoBytes> out) noexcept;
// Fails (kProtocol) on short input, bad magic or version, unknown role or MTU, a QPN or PSN over
// 24 bits, a reserved QPN (0, 1), zero slots or chunk, a null address.
Result<ConnInfo> decodeConnInfo(std::span<const std::byte> in);

// The peer's record fits this end: the opposite role, the same rail, the same ring geometry.
// The message names the field that differs.
Status checkPeerInfo(const ConnInfo& mine, const ConnInfo& peer);

// "qpn 0x11 psn 0x2a gid ::ffff:10.77.1.1 rail 0" for logs.
std::string describeConnInfo(const ConnInfo& c);

}  // namespace reccl::transport::verbs
