// Tap devices that behave like physical NICs for carrier changes: TUNSETCARRIER drives
// netif_carrier_on/off, the same driver-side path (and non-urgent linkwatch work) a real NIC's
// link loss takes, unlike a veth whose peer going down is delivered at once.
//
// Devices are persistent and multi-queue (IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE), so any process
// in the device's namespace can attach one more queue, flip the carrier and detach again without
// talking to whoever moves the frames (see docs/testbed.md for the inject recipe). Created ones
// also carry a vnet header and checksum/TSO offload (IFF_VNET_HDR, TUNSETOFFLOAD): every frame
// read or written on their queues starts with a struct virtio_net_hdr, and TCP segments of up
// to 64 KiB cross in one frame, as they leave a physical NIC's driver.
#pragma once

#include <string_view>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::netlink {

// Creates the persistent tap in /run/netns/NETNS (empty: current namespace) and returns its first
// queue. kExists when the name is taken.
Result<UniqueFd> createTap(std::string_view netns, std::string_view name, bool nonblocking = false);
// Attaches one more queue to an existing multi-queue tap in NETNS; kNotFound when there is none.
// It asks for createTap's flags (vnet header included): a tap with no queue attached takes them.
Result<UniqueFd> attachTapQueue(std::string_view netns, std::string_view name,
                                bool nonblocking = false);
// TUNSETCARRIER through an attached queue; the carrier is per device, not per queue.
Status setTapCarrier(int queueFd, bool on);
// Attaches one more queue and disables it for traffic (TUNSETQUEUE IFF_DETACH_QUEUE, so no
// transmit flow is steered into it): a queue to hold for repeated setTapCarrier(fd, on). Attaching
// and closing a queue each send an RTM_NEWLINK whose flags show the carrier as it is then, so a
// caller that plays a NIC driver's carrier changes holds one rather than attach one per change.
Result<UniqueFd> holdTapQueue(std::string_view netns, std::string_view name);
// Attaches a queue, disables it for traffic (as holdTapQueue), sets the carrier and closes it. The carrier stays as set as long as
// another queue stays attached (the kernel drops carrier only when the last queue goes).
Status setTapCarrier(std::string_view netns, std::string_view name, bool on);

}  // namespace reccl::netlink
