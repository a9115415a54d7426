// The network devices the plugin offers NCCL (RECCL_NET_DEVICES):
// - nic (the default): one per NIC a reccl communicator would use on this host, as NCCL's own
//   transports list NICs, so NCCL's topology search pairs each GPU with its nearest NIC. A
//   connection made on device i is a communicator with one channel on NIC i's rail
//   (core::CommOptions::homeNic): it carries on NIC i and fails over to the host's other NICs.
// - fused: one device over every NIC. A connection's communicator spreads its channels over all
//   of them and moves them between NICs on a fault; NCCL sees one NIC of their summed speed.
#pragma once

#include <string>
#include <vector>

#include "reccl/common/status.h"

namespace reccl::nccl_net {

struct NetDevice {
  std::string homeNic;            // per-NIC: its NIC, where its connections carry; fused: ""
  std::string name;               // "reccl:rail1" (per-NIC), "reccl:rail0+rail1" (fused)
  std::string pciPath;            // its (first) NIC's PCI device in /sys; "" for a virtual NIC
  int speedMbps = 0;              // its NIC's speed; fused: the NICs' speeds added up
};

// What the plugin reads of one NIC.
struct NicFacts {
  std::string name;
  int speedMbps = 0;
  std::string pciPath;  // "" for a virtual NIC
};

// Pure: the devices over `nics` (in the communicator's order), one per NIC or one fused.
std::vector<NetDevice> devicesOver(const std::vector<NicFacts>& nics, bool fused);

// This host's NICs as a communicator would pick them, as devices of RECCL_NET_DEVICES's mode; an
// error when none is usable or the mode is not one.
Result<std::vector<NetDevice>> discoverDevices();

// Pure: a NIC's speed from /sys/class/net/<nic>/speed's text; virtual NICs (veth, tap) report
// -1 or nothing, and count as 10 Gbit/s, as NCCL's socket transport counts them.
int nicSpeedMbps(const std::string& sysfsText);

}  // namespace reccl::nccl_net
