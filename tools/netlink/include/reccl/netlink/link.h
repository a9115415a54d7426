// rtnetlink operations on network devices: veth pairs, bridges, ports, admin state, MTU, queries.
// Devices are addressed by name inside the namespace of the socket passed in.
#pragma once

#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/netlink/link_info.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::netlink {

struct VethEnd {
  std::string_view name;
  int netnsFd = -1;  // the namespace the end is created in; -1: the socket's namespace
};

// One RTM_NEWLINK that creates both ends directly in their target namespaces (IFLA_NET_NS_FD on
// each), so neither name ever exists in the socket's namespace and parallel callers do not
// collide there. mtu 0 keeps the kernel default.
Status createVethPair(NlSocket& nl, const VethEnd& a, const VethEnd& b, int mtu = 0);
Status createBridge(NlSocket& nl, std::string_view name, int mtu = 0);
Status deleteLink(NlSocket& nl, std::string_view name);
// Enslaves `port` to `master` (a bridge); an empty master releases the port.
Status setLinkMaster(NlSocket& nl, std::string_view port, std::string_view master);
Status setLinkUp(NlSocket& nl, std::string_view name, bool up);
Status setLinkMtu(NlSocket& nl, std::string_view name, int mtu);

Result<LinkInfo> getLink(NlSocket& nl, std::string_view name);
Result<LinkInfo> getLinkByIndex(NlSocket& nl, int ifindex);
Result<std::vector<LinkInfo>> listLinks(NlSocket& nl);

}  // namespace reccl::netlink
