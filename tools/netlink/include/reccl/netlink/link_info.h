// What rtnetlink reports about one network device.
#pragma once

#include <cstdint>
#include <string>

namespace reccl::netlink {

struct LinkInfo {
  int ifindex = 0;
  std::string name;
  std::string kind;        // IFLA_INFO_KIND: "veth", "bridge", "tun", "" for loopback
  uint32_t flags = 0;      // IFF_* (IFF_UP, IFF_RUNNING, IFF_LOWER_UP, ...)
  uint8_t operstate = 0;   // IF_OPER_* (IF_OPER_UP = 6, IF_OPER_DOWN = 2, ...)
  bool carrier = false;    // IFLA_CARRIER
  uint32_t mtu = 0;
  int masterIfindex = 0;   // the bridge a port is enslaved to; 0 when none
  // veth: the peer's ifindex (IFLA_LINK) and the id of the peer's namespace as seen from this
  // device's namespace (IFLA_LINK_NETNSID); -1 when the peer is in the same namespace.
  int peerIfindex = 0;
  int peerNetnsId = -1;

  bool adminUp() const noexcept { return (flags & 0x1u) != 0; }  // IFF_UP
};

const char* operstateName(uint8_t operstate) noexcept;

}  // namespace reccl::netlink
