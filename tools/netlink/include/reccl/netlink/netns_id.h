// Namespace ids (nsid): how rtnetlink names another namespace, e.g. a veth peer's
// (IFLA_LINK_NETNSID). Ids are local to the namespace of the socket that asks.
#pragma once

#include <string>

#include "reccl/common/status.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::netlink {

// The id the socket's namespace uses for the namespace behind netnsFd; kNotFound when none is
// assigned.
Result<int> getNetnsId(NlSocket& nl, int netnsFd);
// The /run/netns name whose namespace has id nsid as seen from the socket's namespace.
Result<std::string> netnsNameForId(NlSocket& nl, int nsid);

}  // namespace reccl::netlink
