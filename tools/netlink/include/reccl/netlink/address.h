// IPv4 addresses on network devices (RTM_NEWADDR), plus parsing "10.100.0.1/24".
#pragma once

#include <netinet/in.h>

#include <string>
#include <string_view>

#include "reccl/common/status.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::netlink {

struct Ipv4Prefix {
  in_addr addr{};
  int prefixLen = 32;

  std::string addrString() const;  // "10.100.0.1"
  std::string toString() const;    // "10.100.0.1/24"
};

// Parses "A.B.C.D/N" (N in [0,32]) or "A.B.C.D" (/32). kInvalidArgument otherwise.
Result<Ipv4Prefix> parseIpv4Prefix(std::string_view text);

// Adds the address (with its broadcast) to `dev` in the socket's namespace.
Status addIpv4Address(NlSocket& nl, std::string_view dev, const Ipv4Prefix& prefix);

}  // namespace reccl::netlink
