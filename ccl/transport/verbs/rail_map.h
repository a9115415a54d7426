// Which RDMA port (device, port, GID) serves a rail NIC. The inventory of every verbs device's
// ports and GID tables is read once (readRdmaInventory, the only part that needs a device); the
// mapping is a pure function of it, tested with tables (tests/unit/ccl/verbs_pure_test.cpp).
//
// A RoCE GID table entry names the netdev it belongs to (ibv_gid_entry.ndev_ifindex), so a rail
// NIC finds its device without naming conventions: a bond, a VLAN or an rxe device on any NIC.
// The GID chosen is NCCL's default: RoCE v2 (routable UDP), IPv4-mapped, here the one of the rail
// NIC's own address.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::transport::verbs {

enum class GidType : uint8_t { kIb, kRoceV1, kRoceV2 };
const char* gidTypeName(GidType t) noexcept;

struct GidRecord {
  std::string device;
  uint8_t port = 1;
  uint16_t index = 0;
  GidType type = GidType::kRoceV2;
  uint32_t ifindex = 0;  // the netdev the entry belongs to (RoCE); 0 on InfiniBand
  std::array<uint8_t, 16> gid{};
};

struct PortRecord {
  std::string device;
  uint8_t port = 1;
  bool active = false;   // IBV_PORT_ACTIVE
  std::string state;     // "ACTIVE", "DOWN", ... for messages
  ibv_mtu activeMtu = IBV_MTU_1024;
  uint16_t lid = 0;
};

struct RdmaInventory {
  std::vector<PortRecord> ports;
  std::vector<GidRecord> gids;
};

// A rail NIC as the topology knows it.
struct RailNic {
  std::string name;
  uint32_t ifindex = 0;
  uint32_t ipv4 = 0;  // network byte order; 0: none
};

// The port a rail uses.
struct RailPort {
  std::string device;
  uint8_t port = 1;
  uint16_t gidIndex = 0;
  std::array<uint8_t, 16> gid{};
  GidType gidType = GidType::kRoceV2;
  bool active = false;
  std::string state;
  ibv_mtu activeMtu = IBV_MTU_1024;
  uint16_t lid = 0;
};

// The RDMA port and GID for `nic`: RoCE v2 with the NIC's IPv4 address mapped, else another
// RoCE v2 IPv4-mapped GID of the NIC, else a RoCE v2 global IPv6 one. forcedGidIndex >= 0
// (RECCL_IB_GID_INDEX) takes that entry of the NIC's port, whatever its type. kNotFound names the
// NIC and what its ports offer when nothing fits.
Result<RailPort> mapRail(const RdmaInventory& inv, const RailNic& nic, int forcedGidIndex = -1);

// ::ffff:a.b.c.d for an IPv4 address in network byte order.
std::array<uint8_t, 16> ipv4MappedGid(uint32_t ipv4) noexcept;
// "::ffff:10.77.1.1" style.
std::string gidString(const std::array<uint8_t, 16>& gid);

// Every verbs device's ports and GID tables (ibv_query_port, ibv_query_gid_table). No device:
// an empty inventory, not an error.
Result<RdmaInventory> readRdmaInventory();
// The rail NIC's ifindex and IPv4 address from the kernel (if_nametoindex, getifaddrs).
Result<RailNic> railNicByName(const std::string& name);

}  // namespace reccl::transport::verbs
