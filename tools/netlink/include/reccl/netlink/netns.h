// Named network namespaces, made the way `ip netns add` makes them: a namespace created by
// unshare(CLONE_NEWNET) on a short-lived thread and kept alive by a bind mount at
// /run/netns/NAME, so `ip netns exec NAME ...` works on them too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::netlink {

inline constexpr const char* kNetnsRunDir = "/run/netns";

// "/run/netns/NAME".
std::string netnsPath(std::string_view name);

// Creates the namespace; kExists when NAME is taken. The calling thread's namespace is unchanged.
Status createNetns(std::string_view name);
// Unmounts and unlinks /run/netns/NAME; kNotFound when it does not exist. The namespace itself
// goes away (with its devices) once no process or fd holds it any more.
Status deleteNetns(std::string_view name);
bool netnsExists(std::string_view name);
// Names under /run/netns, sorted.
std::vector<std::string> listNetns();
// An O_RDONLY|O_CLOEXEC fd on the namespace, usable with setns() and IFLA_NET_NS_FD.
Result<UniqueFd> openNetns(std::string_view name);

}  // namespace reccl::netlink
