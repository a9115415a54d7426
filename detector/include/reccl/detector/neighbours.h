// A link's neighbour entries after an outage. A packet sent over a device while its link is down
// leaves the IPv4 neighbour (ARP) entry of its destination INCOMPLETE, and the kernel asks again
// only after the device's retrans_time_ms (1 s by default): for up to that long after the link
// comes back, everything sent to that neighbour waits in the entry's queue, a failover's new
// connection onto the returned rail included (its SYN-ACK waits for the ARP). So when the link
// comes back, the detector asks at once: an ARP request for each unresolved entry, whose reply
// the kernel takes as the resolution and sends what waits. Deleting the entries instead would
// fail what waits in them (the kernel reports each queued packet unreachable: a connect() whose
// SYN waits there fails with EHOSTUNREACH), in any process that uses the device.
#pragma once

#include <cstdint>
#include <string>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::detector {

// Pure: the neighbour states worth asking for again when the link comes back (NUD_INCOMPLETE:
// its next try is due only at retrans_time; NUD_FAILED: the next packet would ask anyway, but
// only then).
bool unresolvedNeighbourState(uint16_t ndmState) noexcept;

class NeighbourTable {
 public:
  // Its sockets in `netnsFd` (< 0: own namespace): rtnetlink to read the table, and a packet
  // socket for the ARP requests (CAP_NET_RAW there; kPermission without it).
  static Result<NeighbourTable> open(int netnsFd);
  // Sends an ARP request over `ifindex` (named `ifname`) for each of its unresolved IPv4
  // neighbours; how many. Devices other than Ethernet-like ones, or without an IPv4 address,
  // are left alone (0).
  Result<int> probeUnresolved(uint32_t ifindex, const std::string& ifname);

 private:
  MnlSocketPtr sock_;
  UniqueFd arp_;
  uint32_t seq_ = 1;
};

}  // namespace reccl::detector
