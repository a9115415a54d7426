#include "reccl/netlink/link.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <string>

namespace reccl::netlink {

const char* operstateName(uint8_t operstate) noexcept {
  switch (operstate) {
    case IF_OPER_UNKNOWN: return "unknown";
    case IF_OPER_NOTPRESENT: return "notpresent";
    case IF_OPER_DOWN: return "down";
    case IF_OPER_LOWERLAYERDOWN: return "lowerlayerdown";
    case IF_OPER_TESTING: return "testing";
    case IF_OPER_DORMANT: return "dormant";
    case IF_OPER_UP: return "up";
    default: return "?";
  }
}

namespace {

std::string str(std::string_view v) { return std::string(v); }

Status checkName(std::string_view name, const char* what) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return {Errc::kInvalidArgument,
            std::string(what) + " '" + str(name) + "' must be 1-15 characters"};
  }
  return Status::Ok();
}

ifinfomsg* putIfinfo(nlmsghdr* nlh) {
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  return ifm;
}

void putName(nlmsghdr* nlh, std::string_view name) {
  mnl_attr_put(nlh, IFLA_IFNAME, name.size() + 1, str(name).c_str());
}

int parseLinkAttr(const nlattr* attr, void* data) {
  const nlattr** tb = static_cast<const nlattr**>(data);
  int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, IFLA_MAX) < 0) return MNL_CB_OK;
  tb[type] = attr;
  return MNL_CB_OK;
}

int parseInfoAttr(const nlattr* attr, void* data) {
  const nlattr** tb = static_cast<const nlattr**>(data);
  if (mnl_attr_type_valid(attr, IFLA_INFO_MAX) < 0) return MNL_CB_OK;
  tb[mnl_attr_get_type(attr)] = attr;
  return MNL_CB_OK;
}

LinkInfo parseLink(const nlmsghdr* nlh) {
  LinkInfo info;
  const auto* ifm = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  info.ifindex = ifm->ifi_index;
  info.flags = ifm->ifi_flags;
  const nlattr* tb[IFLA_MAX + 1] = {};
  mnl_attr_parse(nlh, sizeof(*ifm), parseLinkAttr, tb);
  if (tb[IFLA_IFNAME]) info.name = mnl_attr_get_str(tb[IFLA_IFNAME]);
  if (tb[IFLA_MTU]) info.mtu = mnl_attr_get_u32(tb[IFLA_MTU]);
  if (tb[IFLA_OPERSTATE]) info.operstate = mnl_attr_get_u8(tb[IFLA_OPERSTATE]);
  if (tb[IFLA_CARRIER]) info.carrier = mnl_attr_get_u8(tb[IFLA_CARRIER]) != 0;
  if (tb[IFLA_MASTER]) info.masterIfindex = static_cast<int>(mnl_attr_get_u32(tb[IFLA_MASTER]));
  if (tb[IFLA_LINK]) info.peerIfindex = static_cast<int>(mnl_attr_get_u32(tb[IFLA_LINK]));
  if (tb[IFLA_LINK_NETNSID]) {
    info.peerNetnsId = static_cast<int32_t>(mnl_attr_get_u32(tb[IFLA_LINK_NETNSID]));
  }
  if (tb[IFLA_LINKINFO]) {
    const nlattr* itb[IFLA_INFO_MAX + 1] = {};
    mnl_attr_parse_nested(tb[IFLA_LINKINFO], parseInfoAttr, itb);
    if (itb[IFLA_INFO_KIND]) info.kind = mnl_attr_get_str(itb[IFLA_INFO_KIND]);
  }
  // The kernel leaves IFLA_LINK out when it equals the device's own ifindex, which happens for
  // a veth whose peer in another namespace got the same number there.
  if (!tb[IFLA_LINK] && info.kind == "veth" && info.peerNetnsId >= 0) info.peerIfindex = info.ifindex;
  return info;
}

}  // namespace

Status createVethPair(NlSocket& nl, const VethEnd& a, const VethEnd& b, int mtu) {
  RECCL_TRY(checkName(a.name, "veth name"));
  RECCL_TRY(checkName(b.name, "veth peer name"));
  nlmsghdr* nlh = nl.startMessage(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  putIfinfo(nlh);
  putName(nlh, a.name);
  if (a.netnsFd >= 0) mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, static_cast<uint32_t>(a.netnsFd));
  if (mtu > 0) mnl_attr_put_u32(nlh, IFLA_MTU, static_cast<uint32_t>(mtu));
  nlattr* linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
  nlattr* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
  nlattr* peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
  // The peer's attributes follow its own ifinfomsg inside VETH_INFO_PEER.
  nlh->nlmsg_len += MNL_ALIGN(sizeof(ifinfomsg));
  putName(nlh, b.name);
  if (b.netnsFd >= 0) mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, static_cast<uint32_t>(b.netnsFd));
  if (mtu > 0) mnl_attr_put_u32(nlh, IFLA_MTU, static_cast<uint32_t>(mtu));
  mnl_attr_nest_end(nlh, peer);
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, linkinfo);
  return nl.request(nlh, "create veth " + str(a.name) + "/" + str(b.name));
}

Status createBridge(NlSocket& nl, std::string_view name, int mtu) {
  RECCL_TRY(checkName(name, "bridge name"));
  nlmsghdr* nlh = nl.startMessage(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  putIfinfo(nlh);
  putName(nlh, name);
  if (mtu > 0) mnl_attr_put_u32(nlh, IFLA_MTU, static_cast<uint32_t>(mtu));
  nlattr* linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "bridge");
  mnl_attr_nest_end(nlh, linkinfo);
  return nl.request(nlh, "create bridge " + str(name));
}

Status deleteLink(NlSocket& nl, std::string_view name) {
  RECCL_TRY(checkName(name, "link name"));
  nlmsghdr* nlh = nl.startMessage(RTM_DELLINK, 0);
  putIfinfo(nlh);
  putName(nlh, name);
  return nl.request(nlh, "delete link " + str(name));
}

Status setLinkMaster(NlSocket& nl, std::string_view port, std::string_view master) {
  RECCL_TRY(checkName(port, "port name"));
  uint32_t masterIndex = 0;
  if (!master.empty()) {
    RECCL_ASSIGN_OR_RETURN(LinkInfo m, getLink(nl, master));
    masterIndex = static_cast<uint32_t>(m.ifindex);
  }
  nlmsghdr* nlh = nl.startMessage(RTM_NEWLINK, 0);
  putIfinfo(nlh);
  putName(nlh, port);
  mnl_attr_put_u32(nlh, IFLA_MASTER, masterIndex);
  return nl.request(nlh, "set master of " + str(port) + " to '" + str(master) + "'");
}

Status setLinkUp(NlSocket& nl, std::string_view name, bool up) {
  RECCL_TRY(checkName(name, "link name"));
  nlmsghdr* nlh = nl.startMessage(RTM_NEWLINK, 0);
  ifinfomsg* ifm = putIfinfo(nlh);
  ifm->ifi_change = IFF_UP;
  ifm->ifi_flags = up ? IFF_UP : 0;
  putName(nlh, name);
  return nl.request(nlh, "set " + str(name) + (up ? " up" : " down"));
}

Status setLinkMtu(NlSocket& nl, std::string_view name, int mtu) {
  RECCL_TRY(checkName(name, "link name"));
  if (mtu < 68 || mtu > 65535) {
    return {Errc::kInvalidArgument, "mtu " + std::to_string(mtu) + " out of range [68, 65535]"};
  }
  nlmsghdr* nlh = nl.startMessage(RTM_NEWLINK, 0);
  putIfinfo(nlh);
  putName(nlh, name);
  mnl_attr_put_u32(nlh, IFLA_MTU, static_cast<uint32_t>(mtu));
  return nl.request(nlh, "set mtu of " + str(name) + " to " + std::to_string(mtu));
}

Result<LinkInfo> getLink(NlSocket& nl, std::string_view name) {
  RECCL_TRY(checkName(name, "link name"));
  nlmsghdr* nlh = nl.startMessage(RTM_GETLINK, 0);
  putIfinfo(nlh);
  putName(nlh, name);
  LinkInfo info;
  bool found = false;
  RECCL_TRY(nl.query(nlh, "get link " + str(name), [&](const nlmsghdr* m) {
    if (m->nlmsg_type != RTM_NEWLINK) return;
    info = parseLink(m);
    found = true;
  }));
  if (!found) return Status{Errc::kNotFound, "get link " + str(name) + ": no reply"};
  return info;
}

Result<LinkInfo> getLinkByIndex(NlSocket& nl, int ifindex) {
  nlmsghdr* nlh = nl.startMessage(RTM_GETLINK, 0);
  ifinfomsg* ifm = putIfinfo(nlh);
  ifm->ifi_index = ifindex;
  LinkInfo info;
  bool found = false;
  RECCL_TRY(nl.query(nlh, "get link #" + std::to_string(ifindex), [&](const nlmsghdr* m) {
    if (m->nlmsg_type != RTM_NEWLINK) return;
    info = parseLink(m);
    found = true;
  }));
  if (!found) return Status{Errc::kNotFound, "get link #" + std::to_string(ifindex) + ": no reply"};
  return info;
}

Result<std::vector<LinkInfo>> listLinks(NlSocket& nl) {
  nlmsghdr* nlh = nl.startMessage(RTM_GETLINK, NLM_F_DUMP);
  putIfinfo(nlh);
  std::vector<LinkInfo> links;
  RECCL_TRY(nl.query(nlh, "list links", [&](const nlmsghdr* m) {
    if (m->nlmsg_type == RTM_NEWLINK) links.push_back(parseLink(m));
  }));
  return links;
}

}  // namespace reccl::netlink
