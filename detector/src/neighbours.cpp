#include "reccl/detector/neighbours.h"

#include <libmnl/libmnl.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "reccl/detector/netns.h"

namespace reccl::detector {

bool unresolvedNeighbourState(uint16_t ndmState) noexcept { return (ndmState & (NUD_INCOMPLETE | NUD_FAILED)) != 0; }

Result<NeighbourTable> NeighbourTable::open(int netnsFd) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, socketInNetns(netnsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
  NeighbourTable t;
  RECCL_ASSIGN_OR_RETURN(t.sock_, mnlFromFd(std::move(fd), 0));
  // A reply always comes; the timeout only bounds a wedged kernel.
  timeval tv{1, 0};
  setsockopt(mnl_socket_get_fd(t.sock_.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
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

int onNeigh(const nlmsghdr* nlh, void* data) {
  auto* u = static_cast<Unresolved*>(data);
  if (nlh->nlmsg_type != RTM_NEWNEIGH || nlh->nlmsg_len < mnl_nlmsg_size(sizeof(ndmsg))) return MNL_CB_OK;
  auto* nd = static_cast<const ndmsg*>(mnl_nlmsg_get_payload(nlh));
  if (nd->ndm_family != AF_INET || static_cast<uint32_t>(nd->ndm_ifindex) != u->ifindex ||
      !unresolvedNeighbourState(nd->ndm_state))
    return MNL_CB_OK;
  mnl_attr_parse(nlh, sizeof(*nd), onNeighAttr, u);
  return MNL_CB_OK;
}

}  // namespace

Result<int> NeighbourTable::dropUnresolved(uint32_t ifindex) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETNEIGH;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = ++seq_;
  auto* nd = static_cast<ndmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ndmsg)));
  nd->ndm_family = AF_INET;
  nd->ndm_ifindex = static_cast<int>(ifindex);  // a filter where the kernel applies one; checked below too
  if (mnl_socket_sendto(sock_.get(), nlh, nlh->nlmsg_len) < 0)
    return Status::FromErrno(errno, "rtnetlink: send RTM_GETNEIGH dump");
  Unresolved u{ifindex, {}};
  const uint32_t portid = mnl_socket_get_portid(sock_.get());
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock_.get(), buf.data(), buf.size());
    if (n < 0) return Status::FromErrno(errno, "rtnetlink: recv RTM_GETNEIGH dump");
    int rc = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq_, portid, onNeigh, &u);
    if (rc == MNL_CB_STOP) break;
    if (rc < 0) return Status::FromErrno(errno, "rtnetlink: RTM_GETNEIGH dump");
  }
  int dropped = 0;
  for (const in_addr& dst : u.dsts) {
    nlh = mnl_nlmsg_put_header(buf.data());
    nlh->nlmsg_type = RTM_DELNEIGH;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++seq_;
    nd = static_cast<ndmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ndmsg)));
    nd->ndm_family = AF_INET;
    nd->ndm_ifindex = static_cast<int>(ifindex);
    mnl_attr_put(nlh, NDA_DST, sizeof(dst), &dst);
    if (mnl_socket_sendto(sock_.get(), nlh, nlh->nlmsg_len) < 0)
      return Status::FromErrno(errno, "rtnetlink: send RTM_DELNEIGH");
    ssize_t n = mnl_socket_recvfrom(sock_.get(), buf.data(), buf.size());
    if (n < 0) return Status::FromErrno(errno, "rtnetlink: recv RTM_DELNEIGH ack");
    int rc = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq_, portid, nullptr, nullptr);
    if (rc < 0) {
      if (errno == ENOENT) continue;  // resolved or gone meanwhile
      return Status::FromErrno(errno, "rtnetlink: RTM_DELNEIGH");
    }
    ++dropped;
  }
  return dropped;
}

}  // namespace reccl::detector
