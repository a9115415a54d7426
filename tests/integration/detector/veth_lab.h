// Namespaces and veth pairs made with iproute2 for the detector tests until the shared testbed
// fixture is available: a "host" namespace whose rails are veth ends, and a "switch" namespace
// holding their peers. Names carry the pid so tests run in parallel; leftovers of killed runs
// (dead pid) are removed on the next start. Link changes go through rtnetlink directly so a
// flap storm is not paced by fork+exec.
#pragma once

#include <dirent.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "reccl/detector/netns.h"
#include "reccl/detector/rtnl_link.h"

namespace reccl::detector::testing {

inline bool runCmd(const std::string& cmd) {
  std::string quiet = cmd + " >/dev/null 2>&1";
  return std::system(quiet.c_str()) == 0;
}

// Removes namespaces "<prefix><pid>-*" whose pid no longer runs.
inline void reapStaleNamespaces(const std::string& prefix) {
  DIR* d = opendir("/run/netns");
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(prefix, 0) != 0) continue;
    int pid = std::atoi(n.c_str() + prefix.size());
    if (pid > 0 && kill(pid, 0) != 0) stale.push_back(n);
  }
  closedir(d);
  for (const auto& n : stale) runCmd("ip netns del " + n);
}

// Sets IFF_UP on a device of a namespace over rtnetlink.
inline bool setLinkUp(int nsFd, const std::string& ifname, bool up) {
  auto fd = socketInNetns(nsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
  if (!fd.ok()) return false;
  auto sock = mnlFromFd(std::move(fd).value(), 0);
  if (!sock.ok()) return false;
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = 1;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_change = IFF_UP;
  ifi->ifi_flags = up ? IFF_UP : 0;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname.c_str());
  if (mnl_socket_sendto(sock->get(), nlh, nlh->nlmsg_len) < 0) return false;
  ssize_t n = mnl_socket_recvfrom(sock->get(), buf, sizeof(buf));
  if (n < 0) return false;
  return mnl_cb_run(buf, n, 1, mnl_socket_get_portid(sock->get()), nullptr, nullptr) >= 0;
}

class VethLab {
 public:
  // rails: host devices eth0..eth{rails-1}, peers sw0..sw{rails-1} in the switch namespace.
  explicit VethLab(const std::string& tag, int rails = 2) {
    const std::string prefix = "rdt-";
    reapStaleNamespaces(prefix);
    base_ = prefix + std::to_string(getpid()) + "-" + tag;
    host_ = base_ + "-h";
    sw_ = base_ + "-s";
    ok_ = runCmd("ip netns add " + host_) && runCmd("ip netns add " + sw_);
    for (int i = 0; ok_ && i < rails; ++i) {
      std::string h = "eth" + std::to_string(i), s = "sw" + std::to_string(i);
      ok_ = runCmd("ip -n " + host_ + " link add " + h + " type veth peer name " + s + " netns " + sw_) &&
            runCmd("ip -n " + host_ + " link set " + h + " up") &&
            runCmd("ip -n " + sw_ + " link set " + s + " up");
    }
    if (ok_) {
      auto h = openNetns(host_);
      auto s = openNetns(sw_);
      ok_ = h.ok() && s.ok();
      if (ok_) {
        hostNs_ = std::move(h).value();
        swNs_ = std::move(s).value();
      }
    }
  }
  // The kernel's link-watch work runs non-urgent carrier events at most once a second, for
  // all devices together: right after set-up its timer is pending and a carrier loss waits for
  // it. Tests of first-fault latency start after that second.
  void settle() const { usleep(1'100'000); }

  ~VethLab() {
    runCmd("ip netns del " + host_);
    runCmd("ip netns del " + sw_);
  }
  VethLab(const VethLab&) = delete;
  VethLab& operator=(const VethLab&) = delete;

  bool ok() const { return ok_; }
  const std::string& hostNs() const { return host_; }
  const std::string& switchNs() const { return sw_; }
  uint32_t hostIno() const { return hostNs_.ino; }
  bool switchPort(int rail, bool up) { return setLinkUp(swNs_.fd.get(), "sw" + std::to_string(rail), up); }
  bool hostPort(int rail, bool up) { return setLinkUp(hostNs_.fd.get(), "eth" + std::to_string(rail), up); }
  uint32_t hostIfindex(int rail) {
    auto q = RtnlLinkQuery::open(hostNs_.fd.get());
    if (!q.ok()) return 0;
    auto i = q->byName("eth" + std::to_string(rail));
    return i.ok() ? i->ifindex : 0;
  }

 private:
  std::string base_, host_, sw_;
  Netns hostNs_, swNs_;
  bool ok_ = false;
};

}  // namespace reccl::detector::testing
