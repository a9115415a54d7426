// Network namespaces as the detector names them: "" is the caller's own namespace, a value
// with a '/' is a path to an nsfs file (/proc/PID/ns/net), anything else a name under
// /run/netns (iproute2's `ip netns add NAME`).
//
// Opening never blocks and never has side effects on what the path names: the path is opened
// O_PATH first (no open() of a FIFO or device happens), must be a file on nsfs, and only then is
// it reopened for reading through that very descriptor (so a path swapped in between is not
// followed) and asked for its namespace type, which must be a network namespace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

namespace reccl::detector {

struct Netns {
  std::string spec;   // as given
  std::string path;   // resolved nsfs path ("" when handed over as a descriptor)
  uint32_t ino = 0;   // inode: the identity BPF programs see as net->ns.inum
  UniqueFd fd;        // open nsfs file (O_RDONLY); invalid for the own namespace
  bool own() const { return !fd.valid(); }
};

Result<Netns> openNetns(std::string_view spec);
// The checked nsfs descriptor of the namespace `spec` names ("": /proc/self/ns/net), kept even
// when it is the caller's own namespace (what a daemon client passes along with a watch).
Result<UniqueFd> openNetnsFd(std::string_view spec);
// A namespace handed over as an open descriptor (the node daemon gets them from its clients over
// SCM_RIGHTS, so a client can only name a namespace it could open itself). It must be an nsfs
// file opened for reading (not O_PATH) whose namespace type is CLONE_NEWNET. `label` is kept as
// the namespace's display name.
Result<Netns> netnsFromFd(UniqueFd fd, std::string label);
// Inode of the caller's own network namespace.
Result<uint32_t> ownNetnsIno();
// A socket created inside the namespace (a short-lived thread enters it, so the caller's own
// namespace never changes). nsFd < 0: the caller's namespace.
Result<UniqueFd> socketInNetns(int nsFd, int domain, int type, int protocol);

}  // namespace reccl::detector
