// Per-namespace sysctls (net.*): /proc/sys/net resolves to the namespace of the thread that
// opens it, so the write happens from inside the namespace.
#pragma once

#include <string>
#include <string_view>

#include "reccl/common/status.h"

namespace reccl::netlink {

// key in path form below /proc/sys, e.g. "net/ipv6/conf/all/disable_ipv6". Empty netns: current.
Status writeNetnsSysctl(std::string_view netns, std::string_view key, std::string_view value);
Result<std::string> readNetnsSysctl(std::string_view netns, std::string_view key);

}  // namespace reccl::netlink
