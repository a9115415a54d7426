// Network namespaces as the detector names them: "" is the caller's own namespace, a value
// with a '/' is a path to an nsfs file (/proc/PID/ns/net), anything else a name under
// /run/netns (iproute2's `ip netns add NAME`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::detector {

struct Netns {
  std::string spec;   // as given
  std::string path;   // resolved nsfs path
  uint32_t ino = 0;   // inode: the identity BPF programs see as net->ns.inum
  UniqueFd fd;        // open nsfs file (O_RDONLY); invalid for the own namespace
  bool own() const { return !fd.valid(); }
};

Result<Netns> openNetns(std::string_view spec);
// Inode of the caller's own network namespace.
Result<uint32_t> ownNetnsIno();
// A socket created inside the namespace (a short-lived thread enters it, so the caller's own
// namespace never changes). nsFd < 0: the caller's namespace.
Result<UniqueFd> socketInNetns(int nsFd, int domain, int type, int protocol);

}  // namespace reccl::detector
