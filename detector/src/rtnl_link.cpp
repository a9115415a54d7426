#include "reccl/detector/rtnl_link.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "reccl/detector/netns.h"

namespace reccl::detector {

void MnlSocketDeleter::operator()(mnl_socket* s) const noexcept {
  if (s) mnl_socket_close(s);
}

namespace {
struct AttrCtx {
  RtnlLinkInfo* info;
  bool haveCarrier = false;
};

int onAttr(const nlattr* attr, void* data) {
  auto* ctx = static_cast<AttrCtx*>(data);
  switch (mnl_attr_get_type(attr)) {
    case IFLA_IFNAME:
      if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) ctx->info->ifname = mnl_attr_get_str(attr);
      break;
    case IFLA_CARRIER:
      if (mnl_attr_validate(attr, MNL_TYPE_U8) >= 0) {
        ctx->info->carrier = mnl_attr_get_u8(attr) != 0;
        ctx->haveCarrier = true;
      }
      break;
    case IFLA_LINK:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) ctx->info->iflink = mnl_attr_get_u32(attr);
      break;
    case IFLA_CARRIER_UP_COUNT:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) {
        ctx->info->carrierUpCount = mnl_attr_get_u32(attr);
        ctx->info->haveCounts = true;
      }
      break;
    case IFLA_CARRIER_DOWN_COUNT:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) {
        ctx->info->carrierDownCount = mnl_attr_get_u32(attr);
        ctx->info->haveCounts = true;
      }
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}
}  // namespace

Result<RtnlLinkInfo> parseRtnlLink(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWLINK && nlh->nlmsg_type != RTM_DELLINK)
    return Status(Errc::kProtocol, "rtnetlink: not a link message");
  if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(ifinfomsg)))
    return Status(Errc::kProtocol, "rtnetlink: short link message");
  auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  RtnlLinkInfo info;
  info.ifindex = static_cast<uint32_t>(ifi->ifi_index);
  info.adminUp = (ifi->ifi_flags & IFF_UP) != 0;
  info.deleted = nlh->nlmsg_type == RTM_DELLINK;
  AttrCtx ctx{&info};
  mnl_attr_parse(nlh, sizeof(*ifi), onAttr, &ctx);
  if (!ctx.haveCarrier) info.carrier = (ifi->ifi_flags & IFF_LOWER_UP) != 0;
  return info;
}

Result<MnlSocketPtr> mnlFromFd(UniqueFd fd, unsigned groups) {
  mnl_socket* s = mnl_socket_fdopen(fd.get());
  if (!s) return Status::FromErrno(errno, "rtnetlink: mnl_socket_fdopen");
  fd.release();
  MnlSocketPtr sock(s);
  if (mnl_socket_bind(sock.get(), groups, MNL_SOCKET_AUTOPID) < 0)
    return Status::FromErrno(errno, "rtnetlink: bind");
  return sock;
}

Result<RtnlLinkQuery> RtnlLinkQuery::open(int netnsFd) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, socketInNetns(netnsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
  RtnlLinkQuery q;
  RECCL_ASSIGN_OR_RETURN(q.sock_, mnlFromFd(std::move(fd), 0));
  q.portid_ = mnl_socket_get_portid(q.sock_.get());
  // A reply always comes; the timeout only bounds a wedged kernel.
  timeval tv{1, 0};
  setsockopt(mnl_socket_get_fd(q.sock_.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return q;
}

Result<RtnlLinkInfo> RtnlLinkQuery::byIndex(uint32_t ifindex) { return query(ifindex, {}); }
Result<RtnlLinkInfo> RtnlLinkQuery::byName(std::string_view ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ)
    return Status(Errc::kInvalidArgument, "dev: bad interface name '" + std::string(ifname) + "'");
  return query(0, ifname);
}

Status rtnlDump(mnl_socket* sock, const nlmsghdr* request, const std::function<void(const nlmsghdr*)>& onMessage,
                const std::string& what) {
  if (mnl_socket_sendto(sock, request, request->nlmsg_len) < 0)
    return Status::FromErrno(errno, "rtnetlink: send " + what);
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  const uint32_t want = request->nlmsg_seq;
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "rtnetlink: recv " + what);
    auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
    int len = static_cast<int>(n);
    for (; mnl_nlmsg_ok(h, len); h = mnl_nlmsg_next(h, &len)) {
      if (h->nlmsg_seq != want) continue;
      if (h->nlmsg_type == NLMSG_DONE) return Status::Ok();
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(h));
        return Status::FromErrno(-e->error, "rtnetlink: " + what);
      }
      onMessage(h);
    }
  }
}

Result<std::vector<RtnlLinkInfo>> RtnlLinkQuery::all() {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = ++seq_;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  std::vector<RtnlLinkInfo> out;
  RECCL_TRY(rtnlDump(sock_.get(), nlh, [&](const nlmsghdr* h) {
    auto info = parseRtnlLink(h);
    if (info.ok()) out.push_back(std::move(info).value());
  }, "RTM_GETLINK dump"));
  return out;
}

Result<RtnlLinkInfo> RtnlLinkQuery::query(uint32_t ifindex, std::string_view ifname) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  nlh->nlmsg_seq = ++seq_;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = static_cast<int>(ifindex);
  if (!ifname.empty()) mnl_attr_put_strz(nlh, IFLA_IFNAME, std::string(ifname).c_str());
  mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  if (mnl_socket_sendto(sock_.get(), nlh, nlh->nlmsg_len) < 0)
    return Status::FromErrno(errno, "rtnetlink: send RTM_GETLINK");
  const uint32_t want = seq_;
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock_.get(), buf.data(), buf.size());
    if (n < 0) return Status::FromErrno(errno, "rtnetlink: recv RTM_GETLINK");
    auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
    int len = static_cast<int>(n);
    for (; mnl_nlmsg_ok(h, len); h = mnl_nlmsg_next(h, &len)) {
      if (h->nlmsg_seq != want) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(h));
        int err = -e->error;
        std::string what = ifname.empty() ? "ifindex " + std::to_string(ifindex) : std::string(ifname);
        if (err == ENODEV)
          return Status(Errc::kNotFound, "dev: no interface " + what);
        return Status::FromErrno(err, "rtnetlink: RTM_GETLINK " + what);
      }
      if (h->nlmsg_type == RTM_NEWLINK) return parseRtnlLink(h);
    }
  }
}

}  // namespace reccl::detector
