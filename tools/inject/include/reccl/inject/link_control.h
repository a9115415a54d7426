// Link faults through rtnetlink: admin state (IFF_UP) of a device and, for tap NICs, the carrier
// (TUNSETCARRIER, the path a physical NIC's driver takes); for a lab VM's virtio NIC its cable
// (lab_cable.h). Keeps one netlink socket per namespace so that a scheduled action costs one
// request, not a socket set-up, and a held queue per tap whose carrier a plan changes.
#pragma once

#include <map>
#include <string>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"
#include "reccl/inject/target.h"
#include "reccl/netlink/link_info.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::inject {

class LinkControl {
 public:
  Status setAdminUp(const ResolvedTarget& t, bool up);
  // kInvalidArgument when the device is neither a tap nor a lab VM's virtio NIC (lab_cable.h).
  // A tap's carrier changes through the queue held for it (holdCarrier), else one attached for
  // this change alone.
  Status setCarrier(const ResolvedTarget& t, bool on);
  // Attaches (disabled for traffic) and keeps a queue of this tap for its carrier changes until
  // this object goes: a change then is one TUNSETCARRIER, with no RTM_NEWLINK of a queue's attach
  // or close telling rtnetlink of the new carrier before the kernel's link-watch does, as with a
  // physical NIC. Idempotent.
  Status holdCarrier(const ResolvedTarget& t);
  Result<netlink::LinkInfo> query(const ResolvedTarget& t);

 private:
  Result<netlink::NlSocket*> socketFor(const std::string& netns);
  std::map<std::string, netlink::NlSocket> sockets_;
  std::map<std::string, UniqueFd> tapQueues_;  // by "netns/dev"
};

// True for the device kinds TUNSETCARRIER works on.
inline bool isTapKind(const std::string& kind) { return kind == "tun" || kind == "tap"; }

}  // namespace reccl::inject
