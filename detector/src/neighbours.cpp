#include "reccl/detector/neighbours.h"

#include <libmnl/libmnl.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "reccl/detector/netns.h"

namespace reccl::detector {

bool unresolvedNeighbourState(uint16_t ndmState) noexcept { return (ndmState & (NUD_INCOMPLETE | NUD_FAILED)) != 0; }

Result<NeighbourTable> NeighbourTable::open(int netnsFd) {
  NeighbourTable t;
  RECCL_ASSIGN_OR_RETURN(UniqueFd nl, socketInNetns(netnsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
  RECCL_ASSIGN_OR_RETURN(t.sock_, mnlFromFd(std::move(nl), 0));
  // A reply always comes; the timeout only bounds a wedged kernel.
  timeval tv{1, 0};
  setsockopt(mnl_socket_get_fd(t.sock_.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  // Protocol 0: a socket only sent from receives nothing (each send names its protocol).
  RECCL_ASSIGN_OR_RETURN(t.arp_, socketInNetns(netnsFd, AF_PACKET, SOCK_DGRAM, 0));
  return t;
}

namespace {

struct Unresolved {
  uint32_t ifindex;
  std::vector<in_addr> dsts;
};

int onNeighAttr(const nlattr* attr, void* data) {
  auto* u = static_cast<Unresolved*>(data);
  if (mnl_attr_get_type(attr) == NDA_DST && mnl_attr_get_payload_len(attr) == sizeof(in_addr)) {
    in_addr a;
    std::memcpy(&a, mnl_attr_get_payload(attr), sizeof(a));
    u->dsts.push_back(a);
  }
  return MNL_CB_OK;
}

void onNeigh(const nlmsghdr* nlh, Unresolved* u) {
  if (nlh->nlmsg_type != RTM_NEWNEIGH || nlh->nlmsg_len < mnl_nlmsg_size(sizeof(ndmsg))) return;
  auto* nd = static_cast<const ndmsg*>(mnl_nlmsg_get_payload(nlh));
  if (nd->ndm_family != AF_INET || static_cast<uint32_t>(nd->ndm_ifindex) != u->ifindex ||
      !unresolvedNeighbourState(nd->ndm_state))
    return;
  mnl_attr_parse(nlh, sizeof(*nd), onNeighAttr, u);
}

// An ARP request as it goes on the wire after the Ethernet header.
struct __attribute__((packed)) ArpRequest {
  uint16_t htype, ptype;
  uint8_t hlen, plen;
  uint16_t op;
  std::array<uint8_t, ETH_ALEN> sha;
  in_addr spa;
  std::array<uint8_t, ETH_ALEN> tha;
  in_addr tpa;
};
static_assert(sizeof(ArpRequest) == 28);

}  // namespace

Result<int> NeighbourTable::probeUnresolved(uint32_t ifindex, const std::string& ifname) {
  // The device's own hardware and IPv4 addresses: the request's sender.
  ifreq ifr{};
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return Status(Errc::kInvalidArgument, "neighbours: bad device name");
  std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  if (ioctl(arp_.get(), SIOCGIFHWADDR, &ifr) != 0) return Status::FromErrno(errno, "neighbours: SIOCGIFHWADDR " + ifname);
  if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) return 0;  // no ARP there
  std::array<uint8_t, ETH_ALEN> mac;
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, ETH_ALEN);
  if (ioctl(arp_.get(), SIOCGIFADDR, &ifr) != 0) {
    if (errno == EADDRNOTAVAIL) return 0;  // no IPv4 address: no IPv4 neighbours either
    return Status::FromErrno(errno, "neighbours: SIOCGIFADDR " + ifname);
  }
  in_addr self;
  std::memcpy(&self, &reinterpret_cast<const sockaddr_in*>(&ifr.ifr_addr)->sin_addr, sizeof(self));

  // The device's unresolved IPv4 entries: NDA_IFINDEX filters the dump in the kernel; onNeigh
  // checks the device too, for a kernel that does not.
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETNEIGH;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = ++seq_;
  auto* nd = static_cast<ndmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ndmsg)));
  nd->ndm_family = AF_INET;
  mnl_attr_put_u32(nlh, NDA_IFINDEX, ifindex);
  Unresolved u{ifindex, {}};
  RECCL_TRY(rtnlDump(sock_.get(), nlh, [&](const nlmsghdr* h) { onNeigh(h, &u); }, "RTM_GETNEIGH dump"));

  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_protocol = htons(ETHERTYPE_ARP);
  to.sll_ifindex = static_cast<int>(ifindex);
  to.sll_halen = ETH_ALEN;
  std::memset(to.sll_addr, 0xff, ETH_ALEN);  // broadcast, as the kernel's own first request
  int probed = 0;
  for (const in_addr& dst : u.dsts) {
    ArpRequest a{};
    a.htype = htons(ARPHRD_ETHER);
    a.ptype = htons(ETHERTYPE_IP);
    a.hlen = ETH_ALEN;
    a.plen = sizeof(in_addr);
    a.op = htons(ARPOP_REQUEST);
    a.sha = mac;
    a.spa = self;
    a.tpa = dst;
    if (sendto(arp_.get(), &a, sizeof(a), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != sizeof(a))
      return Status::FromErrno(errno, "neighbours: send ARP request over " + ifname);
    ++probed;
  }
  return probed;
}

}  // namespace reccl::detector
