// A link's neighbour entries after an outage. A packet sent over a device while its link is down
// leaves the IPv4 neighbour (ARP) entry of its destination INCOMPLETE, and the kernel asks again
// only after the device's retrans_time_ms (1 s by default): for up to that long after the link
// comes back, everything sent to that neighbour waits or is dropped, a failover's new connection
// on the returned rail included (its SYN-ACK waits for the ARP). Dropping such entries when the
// link comes back makes the next packet ask at once.
#pragma once

#include <cstdint>

#include "reccl/common/status.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::detector {

// Pure: the neighbour states worth dropping when the link comes back (NUD_INCOMPLETE, NUD_FAILED).
bool unresolvedNeighbourState(uint16_t ndmState) noexcept;

class NeighbourTable {
 public:
  static Result<NeighbourTable> open(int netnsFd);  // netnsFd < 0: own namespace
  // Deletes the IPv4 neighbour entries of `ifindex` that are unresolved; how many went. Needs
  // CAP_NET_ADMIN in the namespace (kPermission without it).
  Result<int> dropUnresolved(uint32_t ifindex);

 private:
  MnlSocketPtr sock_;
  uint32_t seq_ = 1;
};

}  // namespace reccl::detector
