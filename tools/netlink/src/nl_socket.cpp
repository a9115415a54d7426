#include "reccl/netlink/nl_socket.h"

#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "reccl/common/deadline.h"
#include "reccl/netlink/netns_guard.h"

namespace reccl::netlink {

namespace {
constexpr int kReplyDeadlineMs = 5000;
constexpr size_t kBufSize = 32768;  // a dump of one namespace's links fits comfortably
}  // namespace

NlSocket::NlSocket(mnl_socket* s) : sock_(s), portId_(mnl_socket_get_portid(s)), buf_(kBufSize) {
  seq_ = static_cast<uint32_t>(monotonicNs());
}

NlSocket::NlSocket(NlSocket&& o) noexcept
    : sock_(std::exchange(o.sock_, nullptr)),
      portId_(o.portId_),
      seq_(o.seq_),
      buf_(std::move(o.buf_)) {}

NlSocket& NlSocket::operator=(NlSocket&& o) noexcept {
  if (this != &o) {
    if (sock_ != nullptr) mnl_socket_close(sock_);
    sock_ = std::exchange(o.sock_, nullptr);
    portId_ = o.portId_;
    seq_ = o.seq_;
    buf_ = std::move(o.buf_);
  }
  return *this;
}

NlSocket::~NlSocket() {
  if (sock_ != nullptr) mnl_socket_close(sock_);
}

int NlSocket::fd() const noexcept { return sock_ ? mnl_socket_get_fd(sock_) : -1; }

Result<NlSocket> NlSocket::open() {
  mnl_socket* s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (s == nullptr) return Status::FromErrno(errno, "open rtnetlink socket");
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    int err = errno;
    mnl_socket_close(s);
    return Status::FromErrno(err, "bind rtnetlink socket");
  }
  // Extended acks give the kernel's reason text; the errno alone is enough when unsupported.
  int one = 1;
  mnl_socket_setsockopt(s, NETLINK_EXT_ACK, &one, sizeof(one));
  mnl_socket_setsockopt(s, NETLINK_CAP_ACK, &one, sizeof(one));
  return NlSocket(s);
}

Result<NlSocket> NlSocket::openInNetns(std::string_view netns) {
  if (netns.empty()) return open();
  auto guard = NetnsGuard::enter(netns);
  if (!guard.ok()) return guard.status().Wrap("rtnetlink socket in netns " + std::string(netns));
  return open();
}

nlmsghdr* NlSocket::startMessage(uint16_t type, uint16_t flags) {
  std::fill(buf_.begin(), buf_.end(), 0);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf_.data());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
  nlh->nlmsg_seq = ++seq_;
  return nlh;
}

Status NlSocket::request(nlmsghdr* nlh, std::string_view what) {
  nlh->nlmsg_flags |= NLM_F_ACK;
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) {
    return Status::FromErrno(errno, std::string(what) + ": netlink send");
  }
  return receive(nlh->nlmsg_seq, what, nullptr);
}

Status NlSocket::query(nlmsghdr* nlh, std::string_view what,
                       const std::function<void(const nlmsghdr*)>& onMessage) {
  // A single get is answered by one message; the ack after it tells us the reply is complete.
  if ((nlh->nlmsg_flags & NLM_F_DUMP) != NLM_F_DUMP) nlh->nlmsg_flags |= NLM_F_ACK;
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) {
    return Status::FromErrno(errno, std::string(what) + ": netlink send");
  }
  return receive(nlh->nlmsg_seq, what, &onMessage);
}

namespace {
struct CbState {
  const std::function<void(const nlmsghdr*)>* onMessage;
};

int dataCb(const nlmsghdr* nlh, void* data) {
  auto* st = static_cast<CbState*>(data);
  if (st->onMessage != nullptr) (*st->onMessage)(nlh);
  return MNL_CB_OK;
}
}  // namespace

Status NlSocket::receive(uint32_t seq, std::string_view what,
                         const std::function<void(const nlmsghdr*)>* onMessage) {
  Deadline deadline = Deadline::afterMs(kReplyDeadlineMs);
  CbState st{onMessage};
  const int fd = mnl_socket_get_fd(sock_);
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, deadline.remainingMsForPoll());
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, std::string(what) + ": poll netlink");
    }
    if (pr == 0) return {Errc::kTimeout, std::string(what) + ": no netlink reply within 5 s"};
    ssize_t n = mnl_socket_recvfrom(sock_, buf_.data(), buf_.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, std::string(what) + ": netlink receive");
    }
    int rc = mnl_cb_run(buf_.data(), static_cast<size_t>(n), seq, portId_, dataCb, &st);
    if (rc == MNL_CB_ERROR) return Status::FromErrno(errno, what);
    if (rc == MNL_CB_STOP) return Status::Ok();  // NLMSG_DONE or ack with error 0
  }
}

}  // namespace reccl::netlink
