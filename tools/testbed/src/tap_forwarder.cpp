#include "reccl/testbed/tap_forwarder.h"

#include <linux/close_range.h>
#include <fcntl.h>
#include <sched.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/netns_guard.h"
#include "reccl/testbed/carrier_counters.h"

namespace reccl::testbed {

uint64_t processStartTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // Field 2 (comm) may hold spaces; count fields after its closing parenthesis.
  auto rp = line.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream rest(line.substr(rp + 2));
  std::string field;
  char state = '?';
  rest >> state;
  if (state == 'Z' || state == 'X') return 0;  // exited, only not reaped yet
  // Fields 3..22; starttime is field 22.
  for (int i = 4; i <= 22; ++i) {
    if (!(rest >> field)) return 0;
  }
  return std::stoull(field);
}

namespace {

volatile sig_atomic_t gStop = 0;
void onTerm(int) { gStop = 1; }

// What the forwarder knows about one host NIC / switch port pair. Set up before the fork, so the
// loop in the child never allocates.
struct PairState {
  int hostFd = -1;
  int hostPrioFd = -1;  // the host NIC's priority queue (tap_prio_steer.h)
  int fabricFd = -1;
  int hostMonitor = -1;  // index into the monitor sockets
  char hostDev[IFNAMSIZ] = {};
  char fabricDev[IFNAMSIZ] = {};
  std::optional<CarrierCounters> hostCounters;
  uint64_t carrierCheckedNs = 0;
  bool hostAdminUp = true;
  bool hostCarrier = true;
  bool fabricAdminUp = true;
  bool fabricCarrierSet = true;  // what we last told the switch port
};

struct ForwarderPlan {
  std::vector<PairState> pairs;
  std::vector<int> monitors;  // rtnetlink sockets subscribed to link events, one per namespace
  int fabricMonitor = -1;
};

void setCarrier(int queueFd, bool on) {
  int v = on ? 1 : 0;
  ::ioctl(queueFd, TUNSETCARRIER, &v);
}

struct LinkEvent {
  const char* name = nullptr;
  bool adminUp = false;
};

int linkAttrCb(const nlattr* attr, void* data) {
  auto* ev = static_cast<LinkEvent*>(data);
  if (mnl_attr_get_type(attr) == IFLA_IFNAME && mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0)
    ev->name = mnl_attr_get_str(attr);
  return MNL_CB_OK;
}

// The switch port has link exactly while the host NIC is up with a carrier.
void mirrorToSwitchPort(PairState& p) {
  const bool want = p.hostAdminUp && p.hostCarrier;
  if (want != p.fabricCarrierSet) {
    setCarrier(p.fabricFd, want);
    p.fabricCarrierSet = want;
  }
}

// The host NIC's carrier from the kernel's counts (carrier_counters.h), at once, not when
// link-watch gets to report it; `force` reads both counts (a link event came).
void refreshHostCarrier(PairState& p, uint64_t nowNs, bool force) {
  if (!force && nowNs - p.carrierCheckedNs < kCarrierCutNs) return;
  p.carrierCheckedNs = nowNs;
  auto on = force ? p.hostCounters->on() : p.hostCounters->onCached();
  // A failed read: the device is going away (its queue's EPOLLHUP ends the forwarder); the
  // carrier stays as last read.
  if (on.ok()) p.hostCarrier = *on;
  mirrorToSwitchPort(p);
}

void onLinkEvent(ForwarderPlan& plan, int monitor, const LinkEvent& ev) {
  for (PairState& p : plan.pairs) {
    if (monitor == p.hostMonitor && std::strcmp(ev.name, p.hostDev) == 0) {
      p.hostAdminUp = ev.adminUp;
      refreshHostCarrier(p, monotonicNs(), true);
    } else if (monitor == plan.fabricMonitor && std::strcmp(ev.name, p.fabricDev) == 0) {
      if (ev.adminUp != p.fabricAdminUp) {
        p.fabricAdminUp = ev.adminUp;
        setCarrier(p.hostFd, ev.adminUp);  // the switch port went dark: the NIC loses link
      }
    }
  }
}

void drainMonitor(ForwarderPlan& plan, int monitor) {
  static char buf[65536];
  for (;;) {
    ssize_t n = ::recv(plan.monitors[static_cast<size_t>(monitor)], buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return;  // EAGAIN, or ENOBUFS (events lost; the next event of a NIC corrects it)
    const nlmsghdr* nlh = reinterpret_cast<const nlmsghdr*>(buf);
    int len = static_cast<int>(n);
    for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_type != RTM_NEWLINK) continue;
      const auto* ifm = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
      LinkEvent ev;
      ev.adminUp = (ifm->ifi_flags & IFF_UP) != 0;
      mnl_attr_parse(nlh, sizeof(*ifm), linkAttrCb, &ev);
      if (ev.name != nullptr) onLinkEvent(plan, monitor, ev);
    }
  }
}

// Bytes one queue may move before the others get their turn (a host NIC's bulk queue counts
// what its priority queue moved inside its turn): a frame on an idle rail waits behind at most
// this much of each busy queue's traffic.
constexpr size_t kBurstBytes = 256 * 1024;
// A host NIC's priority queue is looked at again after this much of its bulk queue's traffic
// (or kPrioCheckFrames frames): a priority frame waits behind at most one such stretch, and a
// stream of small frames does not pay an empty read per frame.
constexpr size_t kPrioCheckBytes = 64 * 1024;
constexpr int kPrioCheckFrames = 8;

// epoll tags. Bit 31 set: monitor socket index; else pair index * 4 + the queue's kind.
constexpr uint32_t kMonitorBit = 1u << 31;
enum QueueKind : uint32_t { kHostQueue = 0, kFabricQueue = 1, kHostPrioQueue = 2 };

// A frame is a vnet header and up to a 64 KiB TCP segment (the taps' offload, tap.h).
char gFrame[128 * 1024];

// Moves what `from` holds to the other side of the cable, up to `limit` bytes (the rest comes on
// the next turn); returns the bytes moved. A frame that cannot be delivered (no carrier, port
// down) is dropped, as on a cable. Bulk host traffic lets the NIC's priority queue go first,
// before its first frame and then every kPrioCheckBytes: a flow whose priority dropped from 6 to
// 0 has its older frames in the priority queue, and they must not be overtaken.
size_t moveFrames(PairState& p, QueueKind kind, size_t limit) {
  const bool fromFabric = kind == kFabricQueue;
  const int from = kind == kHostQueue ? p.hostFd : kind == kHostPrioQueue ? p.hostPrioFd : p.fabricFd;
  const int to = fromFabric ? p.hostFd : p.fabricFd;
  const bool yieldToPrio = kind == kHostQueue;
  size_t sinceCheck = kPrioCheckBytes;
  int framesSinceCheck = 0;
  size_t moved = 0;
  while (moved < limit) {
    if (yieldToPrio && (sinceCheck >= kPrioCheckBytes || framesSinceCheck >= kPrioCheckFrames)) {
      moved += moveFrames(p, kHostPrioQueue, limit - moved);
      sinceCheck = 0;
      framesSinceCheck = 0;
      if (moved >= limit) break;
    }
    ssize_t r = ::read(from, gFrame, sizeof(gFrame));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EBADFD) ::_exit(0);
      break;  // EAGAIN
    }
    if (r == 0) break;
    moved += static_cast<size_t>(r);
    sinceCheck += static_cast<size_t>(r);
    ++framesSinceCheck;
    refreshHostCarrier(p, monotonicNs(), false);
    if (!p.hostCarrier || (!fromFabric && !p.hostAdminUp)) continue;
    (void)!::write(to, gFrame, static_cast<size_t>(r));
  }
  return moved;
}

// Runs in the forked child: no allocation in the loop, only syscalls.
[[noreturn]] void forwardLoop(ForwarderPlan& plan) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) ::_exit(1);
  auto watch = [&](int fd, uint32_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = tag;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) ::_exit(1);
  };
  for (size_t i = 0; i < plan.pairs.size(); ++i) {
    const auto base = static_cast<uint32_t>(i * 4);
    watch(plan.pairs[i].hostFd, base + kHostQueue);
    watch(plan.pairs[i].fabricFd, base + kFabricQueue);
    watch(plan.pairs[i].hostPrioFd, base + kHostPrioQueue);
  }
  for (size_t m = 0; m < plan.monitors.size(); ++m) watch(plan.monitors[m], kMonitorBit | static_cast<uint32_t>(m));
  epoll_event evs[64];
  while (!gStop) {
    int n = ::epoll_wait(ep, evs, 64, 1000);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    // Two passes: every ready priority queue before any other (level-triggered: what a turn
    // leaves comes on the next one, after the other ready queues).
    for (int pass = 0; pass < 2; ++pass) {
      for (int e = 0; e < n; ++e) {
        const uint32_t tag = evs[e].data.u32;
        const bool prio = !(tag & kMonitorBit) && (tag % 4) == kHostPrioQueue;
        if (prio != (pass == 0)) continue;
        if (tag & kMonitorBit) {
          drainMonitor(plan, static_cast<int>(tag & ~kMonitorBit));
          continue;
        }
        if (evs[e].events & (EPOLLERR | EPOLLHUP)) ::_exit(0);  // a tap was deleted: testbed gone
        (void)moveFrames(plan.pairs[tag / 4], static_cast<QueueKind>(tag % 4), kBurstBytes);
      }
    }
  }
  ::_exit(0);
}

Result<int> openLinkMonitor(const std::string& netns) {
  RECCL_ASSIGN_OR_RETURN(auto guard, netlink::NetnsGuard::enter(netns));
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
  if (fd < 0) return Status::FromErrno(errno, "link monitor socket in " + netns);
  int rcvbuf = 1 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    Status s = Status::FromErrno(errno, "bind link monitor in " + netns);
    ::close(fd);
    return s;
  }
  return fd;
}

// `keep` is sorted. close_range: no allocation between fork and the loop.
void closeAllExcept(const std::vector<int>& keep) {
  unsigned from = 3;
  for (int k : keep) {
    if (static_cast<unsigned>(k) > from) ::close_range(from, static_cast<unsigned>(k) - 1, 0);
    from = static_cast<unsigned>(k) + 1;
  }
  ::close_range(from, ~0u, 0);
}

}  // namespace

Result<ForwarderHandle> startForwarder(std::vector<TapPair> pairs, const std::string& fabricNetns, int fifoPrio) {
  ForwarderPlan plan;
  std::vector<UniqueFd> monitorOwners;
  std::vector<std::string> monitorNs;
  auto monitorFor = [&](const std::string& ns) -> Result<int> {
    for (size_t i = 0; i < monitorNs.size(); ++i) {
      if (monitorNs[i] == ns) return static_cast<int>(i);
    }
    RECCL_ASSIGN_OR_RETURN(int fd, openLinkMonitor(ns));
    monitorOwners.emplace_back(fd);
    monitorNs.push_back(ns);
    plan.monitors.push_back(fd);
    return static_cast<int>(monitorNs.size() - 1);
  };
  RECCL_ASSIGN_OR_RETURN(plan.fabricMonitor, monitorFor(fabricNetns));
  for (const TapPair& tp : pairs) {
    PairState ps;
    ps.hostFd = tp.host.get();
    ps.hostPrioFd = tp.hostPriority.get();
    ps.fabricFd = tp.fabric.get();
    RECCL_ASSIGN_OR_RETURN(ps.hostMonitor, monitorFor(tp.hostNetns));
    std::strncpy(ps.hostDev, tp.hostDev.c_str(), IFNAMSIZ - 1);
    std::strncpy(ps.fabricDev, tp.fabricDev.c_str(), IFNAMSIZ - 1);
    RECCL_ASSIGN_OR_RETURN(CarrierCounters counters, CarrierCounters::open(tp.hostNetns, tp.hostDev));
    ps.hostCounters.emplace(std::move(counters));
    RECCL_ASSIGN_OR_RETURN(ps.hostCarrier, ps.hostCounters->on());
    plan.pairs.push_back(std::move(ps));
  }
  // The forwarder lives in the fabric namespace, like the switch it is part of: whoever removes
  // the testbed finds it there even without the state record (its queues and monitor sockets
  // would otherwise keep every namespace of the testbed alive).
  RECCL_ASSIGN_OR_RETURN(UniqueFd fabricNs, netlink::openNetns(fabricNetns));
  std::vector<int> keep = plan.monitors;
  keep.push_back(fabricNs.get());
  for (const PairState& p : plan.pairs) {
    keep.push_back(p.hostFd);
    keep.push_back(p.hostPrioFd);
    keep.push_back(p.fabricFd);
    for (int fd : p.hostCounters->fds()) keep.push_back(fd);
  }
  // The forwarder hands its pid back over a pipe once it is in the fabric namespace, so that a
  // `down` right after this returns finds it there; the middle child exits at once, so the
  // forwarder is re-parented to init and never becomes the caller's zombie.
  int pp[2];
  if (::pipe2(pp, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe2 for forwarder");
  UniqueFd pr(pp[0]), pw(pp[1]);
  keep.push_back(pw.get());
  std::sort(keep.begin(), keep.end());
  pid_t mid = ::fork();
  if (mid < 0) return Status::FromErrno(errno, "fork forwarder");
  if (mid == 0) {
    ::setsid();
    pid_t fwd = ::fork();
    if (fwd != 0) ::_exit(fwd < 0 ? 1 : 0);
    // The forwarder must hold nothing else: a test's guard pipe or a caller's socket left open
    // here would outlive them.
    closeAllExcept(keep);
    if (::setns(fabricNs.get(), CLONE_NEWNET) != 0) ::_exit(1);
    ::close(fabricNs.release());
    const pid_t self = ::getpid();
    (void)!::write(pw.get(), &self, sizeof(self));
    ::close(pw.release());
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      if (devnull > 2) ::close(devnull);
    }
    ::prctl(PR_SET_NAME, "reccl-tapfwd");
    struct sigaction sa{};
    sa.sa_handler = onTerm;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    ::signal(SIGHUP, SIG_IGN);
    ::signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    forwardLoop(plan);
  }
  pw.reset();
  int ws = 0;
  while (::waitpid(mid, &ws, 0) < 0 && errno == EINTR) {
  }
  // EOF (the forwarder died before it was in place) or nothing within the deadline: not started.
  pid_t fwd = -1;
  ssize_t n = -1;
  pollfd pfd{pr.get(), POLLIN, 0};
  for (Deadline dl = Deadline::afterMs(10'000); !dl.expired();) {
    int rc = ::poll(&pfd, 1, dl.remainingMsForPoll());
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 1) n = ::read(pr.get(), &fwd, sizeof(fwd));
    break;
  }
  if (n != static_cast<ssize_t>(sizeof(fwd)) || fwd <= 0) {
    return Status{Errc::kSystem, "forwarder did not start"};
  }
  ForwarderHandle h{fwd, processStartTicks(fwd)};
  if (fifoPrio > 0) {
    // Set from here, so that a refusal reaches the caller; the forwarder has one thread.
    sched_param sp{};
    sp.sched_priority = fifoPrio;
    if (::sched_setscheduler(fwd, SCHED_FIFO, &sp) != 0) {
      Status s = Status::FromErrno(errno, "--wire-prio " + std::to_string(fifoPrio) +
                                              ": SCHED_FIFO for the tap forwarder (needs CAP_SYS_NICE; "
                                              "--wire-prio 0 runs it at normal priority)");
      (void)stopForwarder(h.pid, h.startTicks);
      return s;
    }
  }
  // pairs (the parent's copies of the queues) close here; the forwarder holds its own.
  return h;
}

Status stopForwarder(pid_t pid, uint64_t startTicks) {
  if (pid <= 0 || processStartTicks(pid) != startTicks) return Status::Ok();
  if (::kill(pid, SIGTERM) != 0) {
    return errno == ESRCH ? Status::Ok() : Status::FromErrno(errno, "kill forwarder");
  }
  Deadline dl = Deadline::afterMs(2000);
  while (!dl.expired()) {
    if (processStartTicks(pid) != startTicks) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  Deadline dl2 = Deadline::afterMs(2000);
  while (!dl2.expired()) {
    if (processStartTicks(pid) != startTicks) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {Errc::kTimeout, "forwarder pid " + std::to_string(pid) + " did not exit"};
}

}  // namespace reccl::testbed
