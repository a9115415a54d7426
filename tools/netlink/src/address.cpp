#include "reccl/netlink/address.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>

#include <charconv>

#include "reccl/netlink/link.h"

namespace reccl::netlink {

std::string Ipv4Prefix::addrString() const {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, buf, sizeof(buf));
  return buf;
}

std::string Ipv4Prefix::toString() const { return addrString() + "/" + std::to_string(prefixLen); }

Result<Ipv4Prefix> parseIpv4Prefix(std::string_view text) {
  Ipv4Prefix p;
  std::string_view addr = text;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    std::string_view len = text.substr(slash + 1);
    int v = -1;
    auto [ptr, ec] = std::from_chars(len.data(), len.data() + len.size(), v);
    if (ec != std::errc() || ptr != len.data() + len.size() || v < 0 || v > 32) {
      return Status{Errc::kInvalidArgument, "prefix length in '" + std::string(text) + "'"};
    }
    p.prefixLen = v;
  }
  if (::inet_pton(AF_INET, std::string(addr).c_str(), &p.addr) != 1) {
    return Status{Errc::kInvalidArgument, "ipv4 address '" + std::string(text) + "'"};
  }
  return p;
}

Status addIpv4Address(NlSocket& nl, std::string_view dev, const Ipv4Prefix& prefix) {
  RECCL_ASSIGN_OR_RETURN(LinkInfo link, getLink(nl, dev));
  nlmsghdr* nlh = nl.startMessage(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = static_cast<unsigned char>(prefix.prefixLen);
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  ifa->ifa_index = static_cast<unsigned>(link.ifindex);
  mnl_attr_put_u32(nlh, IFA_LOCAL, prefix.addr.s_addr);
  mnl_attr_put_u32(nlh, IFA_ADDRESS, prefix.addr.s_addr);
  if (prefix.prefixLen < 31) {
    uint32_t host = ntohl(prefix.addr.s_addr);
    uint32_t mask = prefix.prefixLen == 0 ? 0 : ~0u << (32 - prefix.prefixLen);
    mnl_attr_put_u32(nlh, IFA_BROADCAST, htonl(host | ~mask));
  }
  return nl.request(nlh, "add address " + prefix.toString() + " to " + std::string(dev));
}

}  // namespace reccl::netlink
