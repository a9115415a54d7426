// The one network device the plugin offers NCCL: every NIC a reccl communicator would use on
// this host, fused. A connection's communicator spreads its channels over all of them and moves
// them between NICs on a fault, so offering each NIC as a device of its own would tell NCCL's
// topology search that a connection uses one NIC when it uses them all.
#pragma once

#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::nccl_net {

struct FusedDevice {
  std::vector<std::string> nics;  // as the communicator picks them (RECCL_NICS)
  std::string name;               // "reccl:rail0+rail1"
  std::string pciPath;            // the first NIC's PCI device in /sys; "" for a virtual NIC
  int speedMbps = 0;              // the NICs' speeds added up
};

// Reads this host's NICs as a communicator would pick them; an error when none is usable.
Result<FusedDevice> discoverFusedDevice();

// Pure: a NIC's speed from /sys/class/net/<nic>/speed's text; virtual NICs (veth, tap) report
// -1 or nothing, and count as 10 Gbit/s, as NCCL's socket transport counts them.
int nicSpeedMbps(const std::string& sysfsText);

}  // namespace reccl::nccl_net
