#include "reccl/inject/target.h"
#include "reccl/inject/quoted.h"

#include <net/if.h>
#include <sys/stat.h>

#include "reccl/netlink/link.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/netns_id.h"
#include "reccl/netlink/nl_socket.h"

namespace reccl::inject {

Result<bool> isRootNetns(std::string_view netns) {
  if (netns.empty()) return true;
  struct stat ns {}, root {};
  std::string path = netlink::netnsPath(netns);
  if (::stat(path.c_str(), &ns) != 0) return Status::FromErrno(errno, "netns " + std::string(netns));
  // init's namespace is the root one; fall back to our own when /proc/1 is not readable.
  if (::stat("/proc/1/ns/net", &root) != 0 && ::stat("/proc/self/ns/net", &root) != 0)
    return Status::FromErrno(errno, "stat /proc/1/ns/net");
  return ns.st_dev == root.st_dev && ns.st_ino == root.st_ino;
}

namespace {

Status refuse(const std::string& what) {
  return {Errc::kPermission, what + " (pass --force to override)"};
}

}  // namespace

Result<ResolvedTarget> resolveTarget(const Target& target, bool force) {
  RECCL_TRY(checkNetnsName(target.netns));
  RECCL_TRY(checkDevName(target.dev));
  if (!target.netns.empty() && !netlink::netnsExists(target.netns))
    return Status{Errc::kNotFound, "netns " + quoteInput(target.netns) + " does not exist"};
  RECCL_ASSIGN_OR_RETURN(bool root, isRootNetns(target.netns));
  if (root && !force)
    return refuse("refusing to act on " + quoteInput(target.dev) + " in the root network namespace");
  if (target.dev == kManagementDev && !force)
    return refuse("refusing to act on the management nic " + std::string(kManagementDev));

  RECCL_ASSIGN_OR_RETURN(auto nl, netlink::NlSocket::openInNetns(target.netns));
  auto link = netlink::getLink(nl, target.dev);
  if (!link) {
    if (link.status().code() == Errc::kNotFound)
      return Status{Errc::kNotFound, "device " + quoteInput(target.dev) + " does not exist in netns " +
                                         quoteInput(target.netns)};
    return link.status();
  }
  ResolvedTarget host{target.netns, target.dev, link->kind, link->ifindex};
  bool isVeth = link->kind == "veth" && link->peerIfindex > 0;

  // The management network's switch port is as off-limits as mgmt0 itself.
  std::string peerNetns = target.netns;
  netlink::LinkInfo peer;
  if (isVeth) {
    if (link->peerNetnsId >= 0) {
      auto name = netlink::netnsNameForId(nl, link->peerNetnsId);
      if (!name) {
        if (target.side == Side::kSwitch)
          return Status{Errc::kNotFound, "the switch-side peer of " + target.toString() +
                                             " is in a namespace without a /run/netns name"};
        isVeth = false;
      } else {
        peerNetns = *name;
      }
    }
    if (isVeth) {
      RECCL_ASSIGN_OR_RETURN(auto peerNl, netlink::NlSocket::openInNetns(peerNetns));
      RECCL_ASSIGN_OR_RETURN(peer, netlink::getLinkByIndex(peerNl, link->peerIfindex));
      if (peer.name == kManagementDev && !force)
        return refuse("refusing to act on " + quoteInput(target.dev) + ": it is the switch port of " +
                      std::string(kManagementDev));
    }
  }
  if (target.side == Side::kHost) return host;

  if (!isVeth)
    return Status{Errc::kInvalidArgument,
                  "--side switch needs a veth nic; " + quoteInput(target.dev) + " is a " +
                      (link->kind.empty() ? std::string("device without a peer") : link->kind) +
                      " (name the switch port in the fabric netns instead)"};
  RECCL_ASSIGN_OR_RETURN(bool peerRoot, isRootNetns(peerNetns));
  if (peerRoot && !force)
    return refuse("refusing to act on the switch side of " + target.toString() +
                  ": the peer is in the root network namespace");
  return ResolvedTarget{peerNetns, peer.name, peer.kind, peer.ifindex};
}

}  // namespace reccl::inject
