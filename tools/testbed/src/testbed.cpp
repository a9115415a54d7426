#include "reccl/testbed/testbed.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/netlink/address.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/netns_id.h"
#include "reccl/netlink/netns_sysctl.h"
#include "reccl/netlink/nl_socket.h"
#include "reccl/netlink/tap.h"
#include "reccl/testbed/tap_forwarder.h"
#include "reccl/testbed/tap_prio_steer.h"
#include "reccl/testbed/testbed_layout.h"

namespace reccl::testbed {

using netlink::NlSocket;

Status requireRoot() {
  if (::geteuid() != 0) {
    return {Errc::kPermission, "must run as root (creates network namespaces and devices)"};
  }
  return Status::Ok();
}

namespace {

std::vector<std::string> namespacesOf(std::string_view name) {
  std::vector<std::string> out;
  for (const std::string& n : netlink::listNetns()) {
    if (isTestbedNetns(name, n)) out.push_back(n);
  }
  return out;
}

// Without a state record a name proves nothing (anyone may call a namespace tb1-h0): a
// namespace counts as the testbed's only when it carries the testbed's own wiring, the fabric
// its `mgmt` bridge, a host its mgmt0 veth whose peer is in the fabric namespace.
bool wiredAsTestbed(std::string_view name, const std::string& netns) {
  auto nl = NlSocket::openInNetns(netns);
  if (!nl.ok()) return false;
  if (netns == fabricNetns(name)) {
    auto bridge = netlink::getLink(*nl, kMgmtBridge);
    return bridge.ok() && bridge->kind == "bridge";
  }
  auto mgmt = netlink::getLink(*nl, kMgmtDev);
  if (!mgmt.ok() || mgmt->kind != "veth" || mgmt->peerNetnsId < 0) return false;
  auto peerNs = netlink::netnsNameForId(*nl, mgmt->peerNetnsId);
  return peerNs.ok() && *peerNs == fabricNetns(name);
}

// The namespaces down may remove: with a record, those it lists; without one, those wired as
// the testbed; everything named like it with force. The rest is reported and kept.
std::vector<std::string> namespacesToRemove(std::string_view name, const TestbedState* st, bool force,
                                            DownReport& report) {
  std::vector<std::string> out;
  for (const std::string& n : namespacesOf(name)) {
    bool ours = force;
    std::string why;
    if (!ours && st != nullptr) {
      ours = n == st->fabricNetns;
      for (const HostState& h : st->hosts) ours = ours || n == h.netns;
      why = "not in testbed " + std::string(name) + "'s state record";
    } else if (!ours) {
      ours = wiredAsTestbed(name, n);
      why = "no state record and not wired as testbed " + std::string(name) + "'s";
    }
    if (ours) out.push_back(n);
    else report.errors.push_back("netns " + n + " kept: " + why + " (remove it with --force)");
  }
  return out;
}

Status addressNic(NlSocket& host, const NicState& nic) {
  RECCL_ASSIGN_OR_RETURN(netlink::Ipv4Prefix p, netlink::parseIpv4Prefix(nic.address));
  RECCL_TRY(netlink::setLinkUp(host, nic.dev, true));
  return netlink::addIpv4Address(host, nic.dev, p);
}

Status attachSwitchPort(NlSocket& fab, const NicState& nic) {
  RECCL_TRY(netlink::setLinkMaster(fab, nic.switchPort, nic.bridge));
  return netlink::setLinkUp(fab, nic.switchPort, true);
}

Status wireVeth(NlSocket& fab, int fabFd, int hostFd, const NicState& nic, int mtu) {
  RECCL_TRY(netlink::createVethPair(fab, {nic.dev, hostFd}, {nic.switchPort, fabFd}, mtu));
  return attachSwitchPort(fab, nic);
}

Status wireTap(NlSocket& fab, const std::string& fabNs, const std::string& hostNs,
               NlSocket& host, const NicState& nic, int mtu, std::vector<TapPair>& pairs) {
  RECCL_ASSIGN_OR_RETURN(UniqueFd hq, netlink::createTap(hostNs, nic.dev, /*nonblocking=*/true));
  // The host NIC's priority queue (tap_prio_steer.h): queue 1, attached second.
  RECCL_ASSIGN_OR_RETURN(UniqueFd hpq, netlink::attachTapQueue(hostNs, nic.dev, true));
  RECCL_ASSIGN_OR_RETURN(UniqueFd fq, netlink::createTap(fabNs, nic.switchPort, true));
  RECCL_TRY(netlink::setLinkMtu(host, nic.dev, mtu));
  RECCL_TRY(netlink::setLinkMtu(fab, nic.switchPort, mtu));
  pairs.push_back({std::move(hq), std::move(hpq), std::move(fq), hostNs, nic.dev, nic.switchPort});
  return attachSwitchPort(fab, nic);
}

// Quiet namespaces: without IPv6 no router solicitations, MLD reports or DAD probes appear on
// the rails, so a rail's counters move only with the traffic a test sends. Set before any device
// is created ("default" covers devices created later).
Status quietNamespace(const std::string& netns) {
  for (const char* key : {"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"}) {
    Status s = netlink::writeNetnsSysctl(netns, key, "1");
    if (!s.ok() && s.code() != Errc::kNotFound) return s;  // kNotFound: kernel without IPv6
  }
  return Status::Ok();
}

// Checked between the steps of build(): a step is a few syscalls, so an interrupted `up` stops
// within milliseconds even on a 64 x 8 testbed.
Status checkStop(const std::function<bool()>& stop) {
  if (stop && stop()) return {Errc::kAborted, "interrupted"};
  return Status::Ok();
}

Status build(TestbedState& st, const std::function<bool()>& stop) {
  const TestbedSpec& spec = st.spec;
  RECCL_TRY(netlink::createNetns(st.fabricNetns));
  RECCL_TRY(quietNamespace(st.fabricNetns));
  RECCL_ASSIGN_OR_RETURN(UniqueFd fabFd, netlink::openNetns(st.fabricNetns));
  RECCL_ASSIGN_OR_RETURN(NlSocket fab, NlSocket::openInNetns(st.fabricNetns));
  RECCL_TRY(netlink::setLinkUp(fab, "lo", true));
  RECCL_TRY(netlink::createBridge(fab, kMgmtBridge, spec.mtu));
  RECCL_TRY(netlink::setLinkUp(fab, kMgmtBridge, true));
  for (int r = 0; r < spec.rails; ++r) {
    RECCL_TRY(netlink::createBridge(fab, railDev(r), spec.mtu));
    RECCL_TRY(netlink::setLinkUp(fab, railDev(r), true));
  }
  std::vector<TapPair> pairs;
  for (const HostState& h : st.hosts) {
    RECCL_TRY(checkStop(stop));
    RECCL_TRY(netlink::createNetns(h.netns));
    RECCL_TRY(quietNamespace(h.netns));
    RECCL_ASSIGN_OR_RETURN(UniqueFd hostFd, netlink::openNetns(h.netns));
    RECCL_ASSIGN_OR_RETURN(NlSocket host, NlSocket::openInNetns(h.netns));
    RECCL_TRY(netlink::setLinkUp(host, "lo", true));
    RECCL_TRY(wireVeth(fab, fabFd.get(), hostFd.get(), h.mgmt, spec.mtu));
    RECCL_TRY(addressNic(host, h.mgmt));
    for (const NicState& nic : h.rails) {
      RECCL_TRY(checkStop(stop));
      if (spec.nic == NicKind::kVeth) {
        RECCL_TRY(wireVeth(fab, fabFd.get(), hostFd.get(), nic, spec.mtu));
      } else {
        RECCL_TRY(wireTap(fab, st.fabricNetns, h.netns, host, nic, spec.mtu, pairs));
      }
      RECCL_TRY(addressNic(host, nic));
    }
  }
  RECCL_TRY(checkStop(stop));
  if (!pairs.empty()) {
    std::vector<int> hostQueues;
    for (const TapPair& tp : pairs) hostQueues.push_back(tp.host.get());
    RECCL_TRY(steerTapsByPriority(hostQueues));
    RECCL_ASSIGN_OR_RETURN(ForwarderHandle fwd, startForwarder(std::move(pairs), st.fabricNetns, spec.wirePrio));
    st.forwarderPid = fwd.pid;
    st.forwarderStartTicks = fwd.startTicks;
    RECCL_TRY(saveState(st));
  }
  return Status::Ok();
}

// The namespace inode a /run/netns bind mount refers to.
ino_t netnsInode(const std::string& netns) {
  struct stat st{};
  if (::stat(netlink::netnsPath(netns).c_str(), &st) != 0) return 0;
  return st.st_ino;
}

std::string commOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string c;
  std::getline(in, c);
  return c;
}

// Processes left inside the namespaces (ranks of a crashed run, servers a test forgot) would keep
// them and their devices alive after the names are gone; they go first.
void killProcessesIn(const std::vector<std::string>& nss, DownReport& report) {
  std::vector<std::pair<ino_t, std::string>> inodes;
  for (const std::string& n : nss) {
    if (ino_t ino = netnsInode(n)) inodes.emplace_back(ino, n);
  }
  if (inodes.empty()) return;
  std::vector<pid_t> victims;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    std::string link = "/proc/" + std::string(e->d_name) + "/ns/net";
    struct stat st{};
    if (::stat(link.c_str(), &st) != 0) continue;
    for (const auto& [ino, n] : inodes) {
      if (st.st_ino == ino) {
        std::string comm = commOf(static_cast<pid_t>(pid));
        if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) {
          report.removed.push_back("process " + std::to_string(pid) + " (" + comm + ") in " + n);
          victims.push_back(static_cast<pid_t>(pid));
        }
      }
    }
  }
  ::closedir(proc);
  Deadline dl = Deadline::afterMs(2000);
  for (pid_t p : victims) {
    // A zombie has already let go of its namespaces.
    while (!dl.expired() && processStartTicks(p) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

Result<TestbedState> Testbed::up(const TestbedSpec& spec, const std::function<bool()>& stop) {
  RECCL_TRY(validateSpec(spec));
  RECCL_TRY(requireRoot());
  auto t0 = monotonicNs();
  TestbedState st = TestbedState::fromSpec(spec);
  if (auto stale = namespacesOf(spec.name); !stale.empty()) {
    return Status{Errc::kExists, "testbed '" + spec.name + "' is in use (netns " + stale.front() +
                                     " exists); remove it with: reccl testbed down --name " + spec.name};
  }
  RECCL_TRY(claimState(st));
  Status built = build(st, stop);
  // A stop that came during the last step still undoes the testbed: whoever stopped `up` wants
  // nothing left, however far it got.
  if (built.ok()) built = checkStop(stop);
  if (Status s = built; !s.ok()) {
    auto rep = down(spec.name);
    std::string left = !rep.ok() ? rep.status().message() : rep->errors.empty() ? "" : rep->errors.front();
    if (!left.empty()) {
      RECCL_WARN(kLogTestbed, "rollback of testbed %s left: %s", spec.name.c_str(), left.c_str());
      // Not kAborted: the caller must not report a clean rollback.
      return Status{Errc::kSystem, "testbed up " + spec.name + ": " + s.message() + "; rollback left: " + left};
    }
    return s.Wrap("testbed up " + spec.name);
  }
  st.status = "up";
  if (Status s = saveState(st); !s.ok()) {
    (void)down(spec.name);
    return s.Wrap("testbed up " + spec.name);
  }
  RECCL_INFO(kLogTestbed, "testbed %s up: %d hosts x %d rails (%s, mtu %d) in %.1f ms",
             spec.name.c_str(), spec.hosts, spec.rails, nicKindName(spec.nic), spec.mtu,
             static_cast<double>(monotonicNs() - t0) / 1e6);
  return st;
}

Result<DownReport> Testbed::down(std::string_view name, bool force) {
  RECCL_TRY(validateTestbedName(name));
  RECCL_TRY(requireRoot());
  DownReport report;
  auto st = loadState(name);
  if (st.ok() && st->forwarderPid > 0) {
    if (processStartTicks(st->forwarderPid) == st->forwarderStartTicks) {
      Status s = stopForwarder(st->forwarderPid, st->forwarderStartTicks);
      if (s.ok()) report.removed.push_back("forwarder pid " + std::to_string(st->forwarderPid));
      else report.errors.push_back(s.ToString());
    }
  }
  const std::vector<std::string> nss = namespacesToRemove(name, st.ok() ? &*st : nullptr, force, report);
  killProcessesIn(nss, report);
  for (const std::string& n : nss) {
    Status s = netlink::deleteNetns(n);
    if (s.ok()) report.removed.push_back("netns " + n);
    else if (s.code() != Errc::kNotFound) report.errors.push_back(s.ToString());
  }
  Status s = removeState(name);
  if (s.ok()) report.removed.push_back("state " + statePath(name));
  else if (s.code() != Errc::kNotFound) report.errors.push_back(s.ToString());
  return report;
}

Result<TestbedState> Testbed::load(std::string_view name) {
  RECCL_TRY(validateTestbedName(name));
  return loadState(name);
}

std::vector<std::string> Testbed::list() { return listStates(); }

}  // namespace reccl::testbed
