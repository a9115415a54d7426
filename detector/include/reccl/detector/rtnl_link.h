// Reading one device's state over rtnetlink (RTM_GETLINK) and parsing RTM_NEWLINK messages.
// Used for the initial state of a watched link, for the link-watch pairing (the kernel's
// link-watch hook names no device, so the watched devices are read right away) and by the
// rtnetlink source.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/common/unique_fd.h"

struct mnl_socket;

namespace reccl::detector {

struct RtnlLinkInfo {
  uint32_t ifindex = 0;
  std::string ifname;
  bool adminUp = false;  // IFF_UP
  bool carrier = false;  // IFLA_CARRIER (netif_carrier_ok), else IFF_LOWER_UP
  bool haveCounts = false;
  uint32_t carrierUpCount = 0;
  uint32_t carrierDownCount = 0;
  bool deleted = false;  // RTM_DELLINK
  uint32_t iflink = 0;   // IFLA_LINK (veth peer, vlan's lower device); 0 when absent
  // Link-watch handles a running device's carrier changes as urgent, never held back, when its
  // iflink is another device (a veth peer may have the same ifindex in its own namespace).
  bool linkwatchUrgent() const { return iflink != 0 && iflink != ifindex; }
  uint64_t carrierSeq() const { return uint64_t(carrierUpCount) + carrierDownCount; }
};

// Parses an RTM_NEWLINK/RTM_DELLINK message; error for anything else.
Result<RtnlLinkInfo> parseRtnlLink(const nlmsghdr* nlh);

struct MnlSocketDeleter {
  void operator()(mnl_socket* s) const noexcept;
};
using MnlSocketPtr = std::unique_ptr<mnl_socket, MnlSocketDeleter>;

// Wraps an already created NETLINK_ROUTE socket (may live in another netns).
Result<MnlSocketPtr> mnlFromFd(UniqueFd fd, unsigned groups);

// Sends the dump `request` (NLM_F_DUMP, its own sequence number) and hands each message of its
// answer to `onMessage` until NLMSG_DONE; messages of other sequence numbers (left over from an
// exchange cut short) are skipped. `what` names the request in errors ("RTM_GETLINK dump").
Status rtnlDump(mnl_socket* sock, const nlmsghdr* request, const std::function<void(const nlmsghdr*)>& onMessage,
                const std::string& what);

// Request/response socket for RTM_GETLINK in one namespace.
class RtnlLinkQuery {
 public:
  static Result<RtnlLinkQuery> open(int netnsFd);  // netnsFd < 0: own namespace
  Result<RtnlLinkInfo> byIndex(uint32_t ifindex);
  Result<RtnlLinkInfo> byName(std::string_view ifname);
  // Every device of the namespace.
  Result<std::vector<RtnlLinkInfo>> all();

 private:
  Result<RtnlLinkInfo> query(uint32_t ifindex, std::string_view ifname);
  MnlSocketPtr sock_;
  uint32_t seq_ = 1;
  uint32_t portid_ = 0;
};

}  // namespace reccl::detector
