#include "reccl/detector/rtnetlink_source.h"

#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <vector>

#include "reccl/common/log.h"
#include "reccl/detector/netns.h"

namespace reccl::detector {

Result<std::unique_ptr<RtnetlinkSource>> RtnetlinkSource::open(int netnsFd, uint32_t netnsIno) {
  auto src = std::unique_ptr<RtnetlinkSource>(new RtnetlinkSource());
  src->netnsIno_ = netnsIno;
  RECCL_ASSIGN_OR_RETURN(UniqueFd fd, socketInNetns(netnsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE));
  // A flap storm produces messages faster than a busy consumer reads them; a large queue makes
  // overruns rare, and drain() resynchronises when one happens anyway.
  int rcvbuf = 4 << 20;
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
  int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) < 0)
    return Status::FromErrno(errno, "rtnetlink: set O_NONBLOCK");
  RECCL_ASSIGN_OR_RETURN(src->sock_, mnlFromFd(std::move(fd), RTMGRP_LINK));
  RECCL_ASSIGN_OR_RETURN(auto q, RtnlLinkQuery::open(netnsFd));
  src->query_ = std::make_unique<RtnlLinkQuery>(std::move(q));
  return src;
}

int RtnetlinkSource::fd() const { return mnl_socket_get_fd(sock_.get()); }

void RtnetlinkSource::watch(const RtnlLinkInfo& current) {
  views_[current.ifindex] =
      View{current.ifname, current.adminUp, current.carrier, current.carrierDownCount, current.haveCounts,
           current.linkwatchUrgent()};
}

void RtnetlinkSource::unwatch(uint32_t ifindex) { views_.erase(ifindex); }

void RtnetlinkSource::apply(const RtnlLinkInfo& info, uint64_t nowNs, std::vector<LinkSignal>& out) {
  auto it = views_.find(info.ifindex);
  if (it == views_.end()) return;
  View& v = it->second;
  bool admin = info.deleted ? false : info.adminUp;
  bool carrier = info.deleted ? false : info.carrier;
  LinkKind kind = classifyTransition(v.adminUp, v.carrier, admin, carrier);
  // Same usability but the kernel counted carrier losses since the last message: flaps went
  // by inside one link-watch period. Re-report the current state so damping counts them.
  bool flapped = info.haveCounts && v.haveDowns && info.carrierDownCount != v.downs;
  if (kind == RECCL_LINK_KIND_NONE && flapped)
    kind = (admin && carrier) ? RECCL_LINK_KIND_CARRIER_UP : RECCL_LINK_KIND_CARRIER_DOWN;
  v.adminUp = admin;
  v.carrier = carrier;
  if (info.haveCounts) {
    v.downs = info.carrierDownCount;
    v.haveDowns = true;
  }
  if (!info.ifname.empty()) v.ifname = info.ifname;
  // Every RTM_NEWLINK carries IFLA_LINK when the device's iflink is another device.
  if (!info.deleted && info.linkwatchUrgent() != v.urgent) {
    v.urgent = info.linkwatchUrgent();
    urgencyChanges_.push_back({info.ifindex, v.urgent});
  }
  if (kind == RECCL_LINK_KIND_NONE) return;
  LinkSignal s;
  s.kind = kind;
  s.source = RECCL_LINK_SRC_RTNETLINK;
  s.tsNs = nowNs;
  s.link = {netnsIno_, info.ifindex};
  s.ifname = v.ifname;
  if (info.haveCounts) {
    s.carrierSeq = info.carrierSeq();
    s.carrierDowns = info.carrierDownCount;
  }
  out.push_back(std::move(s));
}

Status RtnetlinkSource::drain(uint64_t nowNs, std::vector<LinkSignal>& out) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE * 4);
  for (;;) {
    ssize_t n = recv(fd(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      if (errno == ENOBUFS) {
        overruns_++;
        RECCL_WARN(kLogDetector, "rtnetlink: receive queue overrun in netns %u, re-reading %zu links",
                   netnsIno_, views_.size());
        for (auto& [ifindex, view] : views_) {
          auto info = query_->byIndex(ifindex);
          if (info.ok()) {
            apply(info.value(), nowNs, out);
          } else if (info.status().code() == Errc::kNotFound) {
            RtnlLinkInfo gone;
            gone.ifindex = ifindex;
            gone.deleted = true;
            apply(gone, nowNs, out);
          }
        }
        continue;
      }
      return Status::FromErrno(errno, "rtnetlink: recv");
    }
    auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
    int len = static_cast<int>(n);
    for (; mnl_nlmsg_ok(h, len); h = mnl_nlmsg_next(h, &len)) {
      if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
      messages_++;
      auto info = parseRtnlLink(h);
      if (info.ok()) apply(info.value(), nowNs, out);
    }
  }
}

}  // namespace reccl::detector
