// Link faults through rtnetlink: admin state (IFF_UP) of a device and, for tap NICs, the carrier
// (TUNSETCARRIER, the path a physical NIC's driver takes); for a lab VM's virtio NIC its cable
// (lab_cable.h). Keeps one netlink socket per namespace
// so that a scheduled action costs one request, not a socket set-up.
#pragma once

#include <map>
#include <string>

#include "reccl/common/status.h"
#include "reccl/inject/target.h"
#include "reccl/netlink/link_info.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::inject {

class LinkControl {
 public:
  Status setAdminUp(const ResolvedTarget& t, bool up);
  // kInvalidArgument when the device is neither a tap nor a lab VM's virtio NIC (lab_cable.h).
  Status setCarrier(const ResolvedTarget& t, bool on);
  Result<netlink::LinkInfo> query(const ResolvedTarget& t);

 private:
  Result<netlink::NlSocket*> socketFor(const std::string& netns);
  std::map<std::string, netlink::NlSocket> sockets_;
};

// True for the device kinds TUNSETCARRIER works on.
inline bool isTapKind(const std::string& kind) { return kind == "tun" || kind == "tap"; }

}  // namespace reccl::inject
