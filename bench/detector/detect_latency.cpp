// Detection latency of each source, side by side: a real fault (veth peer down over rtnetlink,
// or TUNSETCARRIER on a tap, the driver-side path a physical NIC takes) is injected N times;
// each LinkDown reaching the subscriber callback is timed from the fault syscall and from the
// kernel timestamp of its first signal. Then the same under a flap storm on another link.
// Baseline: in-band TCP, what a transport without a detector has — a TCP flow streams across the
// same link, and detection is the moment the sender's own TCP reports the loss (the first
// retransmission timeout, read from TCP_INFO), timed from the same fault syscall.
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/detector.h"
#include "reccl/detector/netns.h"
#include "reccl/detector/rtnl_link.h"

using namespace reccl;
using namespace reccl::detector;


namespace {

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// A netlink socket kept open in a namespace: one RTM_NEWLINK per fault, no fork+exec.
class LinkSetter {
 public:
  LinkSetter(int nsFd, std::string ifname) : ifname_(std::move(ifname)) {
    auto fd = socketInNetns(nsFd, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    if (fd.ok()) {
      auto s = mnlFromFd(std::move(fd).value(), 0);
      if (s.ok()) sock_ = std::move(s).value();
    }
  }
  bool ok() const { return sock_ != nullptr; }
  bool set(bool up) {
    char buf[MNL_SOCKET_BUFFER_SIZE];
    nlmsghdr* nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = ++seq_;
    auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_change = IFF_UP;
    ifi->ifi_flags = up ? IFF_UP : 0;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname_.c_str());
    if (mnl_socket_sendto(sock_.get(), nlh, nlh->nlmsg_len) < 0) return false;
    ssize_t n = mnl_socket_recvfrom(sock_.get(), buf, sizeof(buf));
    return n > 0 && mnl_cb_run(buf, n, seq_, mnl_socket_get_portid(sock_.get()), nullptr, nullptr) >= 0;
  }

 private:
  std::string ifname_;
  MnlSocketPtr sock_;
  uint32_t seq_ = 0;
};

// A link to fault: down()/up() are the fault syscalls being timed.
struct FaultLink {
  virtual ~FaultLink() = default;
  virtual bool down() = 0;
  virtual bool up() = 0;
  std::string netns, ifname;
};

// The other rail flapping every 500 us while faults are timed on the first; stop() (or the
// destructor) ends it with the link up.
class FlapStorm {
 public:
  explicit FlapStorm(FaultLink* link) {
    if (!link) return;
    thread_ = std::thread([this, link] {
      bool up = false;
      while (!stop_.load()) {
        (up ? link->up() : link->down());
        up = !up;
        usleep(500);
      }
      link->up();
    });
  }
  ~FlapStorm() { stop(); }
  FlapStorm(const FlapStorm&) = delete;
  FlapStorm& operator=(const FlapStorm&) = delete;
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct VethLink : FaultLink {
  std::unique_ptr<LinkSetter> peer;
  bool down() override { return peer->set(false); }
  bool up() override { return peer->set(true); }
};

struct TapLink : FaultLink {
  int fd = -1;
  ~TapLink() override {
    if (fd >= 0) close(fd);
  }
  bool set(int on) { return ioctl(fd, TUNSETCARRIER, &on) == 0; }
  bool down() override { return set(0); }
  bool up() override { return set(1); }
};

// Host namespace with rails: veth0/1 (peers in the switch namespace; a dummy device first so
// s peer ifindexes differ from the host side's, as on a real testbed) and tap0/1.
class Lab {
 public:
  explicit Lab(bool wantTap) {
    host_ = "rdb-" + std::to_string(getpid()) + "-h";
    sw_ = "rdb-" + std::to_string(getpid()) + "-s";
    ok_ = sh("ip netns add " + host_) && sh("ip netns add " + sw_) &&
          sh("ip -n " + sw_ + " link add pad0 type veth peer name pad1");
    for (int i = 0; ok_ && i < 2; ++i) {
      std::string h = "veth" + std::to_string(i), s = "sw" + std::to_string(i);
      ok_ = sh("ip -n " + host_ + " link add " + h + " type veth peer name " + s + " netns " + sw_) &&
            sh("ip -n " + host_ + " link set " + h + " up") && sh("ip -n " + sw_ + " link set " + s + " up");
    }
    if (!ok_) return;
    auto h = openNetns(host_);
    auto s = openNetns(sw_);
    if (!h.ok() || !s.ok()) {
      ok_ = false;
      return;
    }
    hostNs_ = std::move(h).value();
    swNs_ = std::move(s).value();
    // Addresses for the in-band TCP baseline on link 0 (host side .1, switch side .2).
    tcpOk_ = sh("ip -n " + host_ + " addr add " + std::string(kVethHost) + "/24 dev veth0") &&
             sh("ip -n " + sw_ + " addr add " + std::string(kVethPeer) + "/24 dev sw0");
    if (wantTap) {
      for (int i = 0; i < 2; ++i) {
        std::string name = "tap" + std::to_string(i);
        tapFds_[i] = makeTap(hostNs_, name);
        if (tapFds_[i] < 0 || !sh("ip -n " + host_ + " link set " + name + " up")) tapOk_ = false;
      }
      // tap0's far end for the TCP baseline: a tap in the switch namespace; a relay thread
      // (the cable) copies frames between the two.
      peerTapFd_ = makeTap(swNs_, "tapp");
      tapTcpOk_ = tapOk_ && peerTapFd_ >= 0 && sh("ip -n " + sw_ + " link set tapp up") &&
                  sh("ip -n " + host_ + " addr add " + std::string(kTapHost) + "/24 dev tap0") &&
                  sh("ip -n " + sw_ + " addr add " + std::string(kTapPeer) + "/24 dev tapp");
    }
  }
  ~Lab() {
    if (peerTapFd_ >= 0) close(peerTapFd_);
    for (int fd : tapFds_)
      if (fd >= 0) close(fd);
    sh("ip netns del " + host_);
    sh("ip netns del " + sw_);
  }
  static constexpr const char* kVethHost = "10.77.0.1";
  static constexpr const char* kVethPeer = "10.77.0.2";
  static constexpr const char* kTapHost = "10.78.0.1";
  static constexpr const char* kTapPeer = "10.78.0.2";

  bool ok() const { return ok_; }
  bool tapOk() const { return tapOk_ && tapFds_[0] >= 0; }
  bool tcpOk(const std::string& nic) const { return nic == "veth" ? tcpOk_ : tapTcpOk_; }
  int hostNsFd() const { return hostNs_.fd.get(); }
  int swNsFd() const { return swNs_.fd.get(); }
  int tapFd(int i) const { return tapFds_[i]; }
  int peerTapFd() const { return peerTapFd_; }
  const std::string& host() const { return host_; }
  std::unique_ptr<FaultLink> link(const std::string& nic, int i) {
    if (nic == "veth") {
      auto l = std::make_unique<VethLink>();
      l->peer = std::make_unique<LinkSetter>(swNs_.fd.get(), "sw" + std::to_string(i));
      l->netns = host_;
      l->ifname = "veth" + std::to_string(i);
      return l;
    }
    auto l = std::make_unique<TapLink>();
    l->fd = fcntl(tapFds_[i], F_DUPFD_CLOEXEC, 0);
    l->netns = host_;
    l->ifname = "tap" + std::to_string(i);
    return l;
  }

 private:
  // A tap device in namespace ns (a short-lived thread enters it); its fd or -1.
  static int makeTap(const Netns& ns, const std::string& name) {
    int fd = -1;
    std::thread t([&] {
      if (setns(ns.fd.get(), CLONE_NEWNET) != 0) return;
      fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
      if (fd < 0) return;
      ifreq ifr{};
      ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
      std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
      if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
        close(fd);
        fd = -1;
      }
    });
    t.join();
    return fd;
  }

  std::string host_, sw_;
  Netns hostNs_, swNs_;
  int tapFds_[2] = {-1, -1};
  int peerTapFd_ = -1;
  bool ok_ = false, tapOk_ = true, tcpOk_ = false, tapTcpOk_ = false;
};

struct SourceConfig {
  std::string name;
  SourceMode mode;
  std::set<LinkSource> hooks;
  bool rtnetlink;
  LinkSource expect;  // the source that should deliver LinkDown
};

std::vector<SourceConfig> allConfigs() {
  return {
      {"bpf:linkwatch", SourceMode::kBpf, {RECCL_LINK_SRC_RAWTP_LINKWATCH}, false, RECCL_LINK_SRC_RAWTP_LINKWATCH},
      // qdisc_reset reports only losses; rtnetlink brings the link back up between faults.
      {"bpf:qdisc_reset", SourceMode::kBpf, {RECCL_LINK_SRC_TP_QDISC_RESET}, true, RECCL_LINK_SRC_TP_QDISC_RESET},
      {"rtnetlink", SourceMode::kNetlink, {}, true, RECCL_LINK_SRC_RTNETLINK},
      {"auto", SourceMode::kAuto, {}, true, RECCL_LINK_SRC_NONE},
  };
}

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))]; };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  s.max = v.back();
  return s;
}

struct RunResult {
  std::string nic, source, scenario;
  int faults = 0, detected = 0, timeouts = 0, otherSource = 0;
  bool inBand = false;  // tcp baseline: no detector, no kernel timestamp
  Stats faultToCb, kernelToCb;
  std::map<std::string, int> winners;
};

// Collects LinkEvents from the subscriber callback with their arrival time.
class Collector {
 public:
  void onEvent(const LinkEvent& e) {
    uint64_t now = monotonicNs();
    std::lock_guard lk(mu_);
    got_.push_back({e, now});
    cv_.notify_all();
  }
  // Waits for an event of `type` on `ifname` after index `from`.
  bool wait(LinkEventType type, const std::string& ifname, int ms, LinkEvent* e, uint64_t* at) {
    std::unique_lock lk(mu_);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      for (size_t i = next_; i < got_.size(); ++i)
        if (got_[i].first.type == type && got_[i].first.ifname == ifname) {
          *e = got_[i].first;
          *at = got_[i].second;
          next_ = i + 1;
          return true;
        }
      if (cv_.wait_until(lk, deadline) == std::cv_status::timeout) return false;
    }
  }
  void skipAll() {
    std::lock_guard lk(mu_);
    next_ = got_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<LinkEvent, uint64_t>> got_;
  size_t next_ = 0;
};

RunResult measure(Lab& lab, const std::string& nic, const SourceConfig& cfg, int faults, int gapUs, bool storm,
                  int rtPriority) {
  RunResult r;
  r.nic = nic;
  r.source = cfg.name;
  r.scenario = storm ? "flap-storm" : "quiet";
  auto link = lab.link(nic, 0);
  auto stormLink = lab.link(nic, 1);
  DetectorOptions o;
  o.mode = cfg.mode;
  o.rdma = false;
  o.rtnetlink = cfg.rtnetlink;
  o.bpf.sources = cfg.hooks;
  o.stateMachine.holdDownNs = 0;
  o.realtimePriority = rtPriority;
  o.stateMachine.damping.halfLifeNs = 0;  // measured link: no damping between injected faults
  o.watch = {{link->netns, link->ifname}, {stormLink->netns, stormLink->ifname}};
  auto det = Detector::create(o);
  if (!det.ok()) {
    std::fprintf(stderr, "detect_latency: %s %s: %s\n", nic.c_str(), cfg.name.c_str(), det.status().message().c_str());
    return r;
  }
  Collector col;
  det.value()->subscribe([&col](const LinkEvent& e) { col.onEvent(e); });
  if (!det.value()->start().ok()) return r;

  FlapStorm flaps(storm ? stormLink.get() : nullptr);
  std::mt19937 rng(42);
  std::vector<double> f2c, k2c;
  // One warm-up fault, not counted.
  for (int i = -1; i < faults; ++i) {
    LinkEvent e;
    uint64_t at = 0;
    uint64_t t0 = monotonicNs();
    if (!link->down()) break;
    bool got = col.wait(LinkEventType::kLinkDown, link->ifname, 2000, &e, &at);
    if (i >= 0) {
      r.faults++;
      if (got) {
        r.detected++;
        f2c.push_back((at - t0) / 1e3);
        if (e.signalNs && at >= e.signalNs) k2c.push_back((at - e.signalNs) / 1e3);
        r.winners[sourceName(e.source)]++;
        if (cfg.expect != RECCL_LINK_SRC_NONE && e.source != cfg.expect) r.otherSource++;
      } else {
        r.timeouts++;
      }
    }
    link->up();
    col.wait(LinkEventType::kLinkUp, link->ifname, 2000, &e, &at);
    usleep(static_cast<useconds_t>(gapUs + static_cast<int>(rng() % 1000)));
  }
  flaps.stop();
  r.faultToCb = stats(f2c);
  r.kernelToCb = stats(k2c);
  return r;
}

// The cable between tap0 and the switch's tap: copies frames both ways until stopped; while
// `cut` is set it drops them (a pulled cable carries nothing, whatever the driver still queues).
class TapRelay {
 public:
  TapRelay(int a, int b) : a_(a), b_(b) {
    thread_ = std::thread([this] { loop(); });
  }
  ~TapRelay() {
    stop_ = true;
    thread_.join();
  }
  std::atomic<bool> cut{false};

 private:
  void loop() {
    std::vector<char> buf(65536);
    pollfd p[2] = {{a_, POLLIN, 0}, {b_, POLLIN, 0}};
    while (!stop_.load()) {
      if (poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & POLLIN)) continue;
        ssize_t n = read(p[i].fd, buf.data(), buf.size());
        if (n > 0 && !cut.load()) {
          [[maybe_unused]] auto w = write(p[1 - i].fd, buf.data(), static_cast<size_t>(n));
        }
      }
    }
  }
  int a_, b_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The far end of the TCP flow: accepts one connection at a time (a new one replaces the old,
// whose FIN/RST may have been lost while the link was down) and discards what it reads.
class TcpSink {
 public:
  explicit TcpSink(UniqueFd listener) : listen_(std::move(listener)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~TcpSink() {
    stop_ = true;
    thread_.join();
  }

 private:
  void loop() {
    std::vector<char> buf(1 << 20);
    UniqueFd cur;
    while (!stop_.load()) {
      pollfd p[2] = {{listen_.get(), POLLIN, 0}, {cur.get(), POLLIN, 0}};
      if (poll(p, cur ? 2 : 1, 20) <= 0) continue;
      if (p[0].revents & POLLIN) {
        int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) cur = UniqueFd(fd);
        continue;
      }
      if (cur && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t n = recv(cur.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) cur.reset();
      }
    }
  }
  UniqueFd listen_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

sockaddr_in inetAddr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

// Connects from the host namespace to the sink, retrying while the link settles after a fault
// (the first SYN may meet a deactivated qdisc); returns an invalid fd at the deadline.
UniqueFd connectTcp(int hostNsFd, const sockaddr_in& to, const sockaddr_in& from, Deadline dl) {
  while (!dl.expired()) {
    auto r = socketInNetns(hostNsFd, AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (!r.ok()) return {};
    UniqueFd fd = std::move(r).value();
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&from), sizeof(from)) != 0) return {};
    if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) {
      usleep(10'000);
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(300, std::max(1, dl.remainingMsForPoll())))) == 1 &&
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
      return fd;
  }
  return {};
}

// In-band TCP: per fault a fresh connection streams for a while (RTT and RTO settle), then the
// link fails; detected = the sender's TCP entered loss recovery by its retransmission timer
// (TCP_INFO: tcpi_retransmits > 0 or state TCP_CA_Loss) or the socket reports an error. There
// are no duplicate ACKs on a dead link, so the RTO is TCP's first in-band signal. Each trial is
// capped at capMs; a trial that hits the cap is counted as a timeout.
RunResult measureTcp(Lab& lab, const std::string& nic, int faults, int gapUs, bool storm, int capMs) {
  RunResult r;
  r.nic = nic;
  r.source = "tcp-inband";
  r.scenario = storm ? "flap-storm" : "quiet";
  r.inBand = true;
  bool tap = nic == "tap";
  const uint16_t port = 7471;
  sockaddr_in peer = inetAddr(tap ? Lab::kTapPeer : Lab::kVethPeer, port);
  sockaddr_in self = inetAddr(tap ? Lab::kTapHost : Lab::kVethHost, 0);
  auto ls = socketInNetns(lab.swNsFd(), AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (!ls.ok()) {
    std::fprintf(stderr, "detect_latency: tcp: %s\n", ls.status().message().c_str());
    return r;
  }
  UniqueFd listener = std::move(ls).value();
  int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0 ||
      listen(listener.get(), 16) != 0) {
    std::fprintf(stderr, "detect_latency: tcp: listen on %s: %s\n", tap ? Lab::kTapPeer : Lab::kVethPeer,
                 strerror(errno));
    return r;
  }
  std::unique_ptr<TapRelay> relay;
  if (tap) relay = std::make_unique<TapRelay>(lab.tapFd(0), lab.peerTapFd());
  TcpSink sink(std::move(listener));
  auto link = lab.link(nic, 0);
  auto stormLink = lab.link(nic, 1);
  FlapStorm flaps(storm ? stormLink.get() : nullptr);
  std::mt19937 rng(42);
  std::vector<double> f2d;
  std::vector<char> data(64 << 10, 'x');
  for (int i = -1; i < faults; ++i) {
    UniqueFd fd = connectTcp(lab.hostNsFd(), peer, self, Deadline::afterMs(5000));
    if (!fd) {
      std::fprintf(stderr, "detect_latency: tcp: %s: no connection to the sink within 5 s\n", nic.c_str());
      break;
    }
    // Stream 30 ms so the flow is established with data in flight.
    uint64_t warmEnd = monotonicNs() + 30'000'000;
    while (monotonicNs() < warmEnd) {
      [[maybe_unused]] auto n = send(fd.get(), data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      usleep(100);
    }
    uint64_t t0 = monotonicNs();
    if (relay) relay->cut = true;
    if (!link->down()) break;
    uint64_t cap = t0 + static_cast<uint64_t>(capMs) * 1'000'000;
    uint64_t at = 0;
    while (monotonicNs() < cap) {
      [[maybe_unused]] auto n = send(fd.get(), data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      tcp_info ti{};
      socklen_t len = sizeof(ti);
      int err = 0;
      socklen_t elen = sizeof(err);
      bool gone = getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err != 0;
      if (gone || (getsockopt(fd.get(), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
                   (ti.tcpi_retransmits > 0 || ti.tcpi_ca_state == TCP_CA_Loss))) {
        at = monotonicNs();
        break;
      }
      usleep(50);
    }
    if (i >= 0) {
      r.faults++;
      if (at) {
        r.detected++;
        f2d.push_back((at - t0) / 1e3);
        r.winners["tcp-rto"]++;
      } else {
        r.timeouts++;
      }
    }
    linger lg{1, 0};  // RST, not a FIN handshake over a link that just came back
    setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    fd.reset();
    link->up();
    if (relay) relay->cut = false;
    usleep(static_cast<useconds_t>(gapUs + static_cast<int>(rng() % 1000)));
  }
  flaps.stop();
  r.faultToCb = stats(f2d);
  return r;
}

// SIGINT/SIGTERM/SIGHUP (Ctrl-C, `timeout`): the lab's namespaces must not outlive the run. The
// signals are blocked in every thread and taken by one watcher, which removes the namespaces
// (named after this pid, see Lab) and exits; the kernel then drops the taps, veths and BPF links.
void removeLabOnSignal() {
  static sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
  std::thread([] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    std::string pid = std::to_string(getpid());
    for (const char* side : {"-h", "-s"}) {
      std::string cmd = "ip netns del rdb-" + pid + side + " 2>/dev/null";
      if (std::system(cmd.c_str()) != 0) {
        // not made yet, or already gone
      }
    }
    std::fprintf(stderr, "detect_latency: stopped by signal %d; lab removed\n", sig);
    std::_Exit(128 + sig);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  removeLabOnSignal();
  CLI::App app{"detect_latency: link-fault detection latency per source, on veth and tap"};
  app.footer(
      "EXAMPLES:\n"
      "  detect_latency                                  # 200 faults per source, veth and tap\n"
      "  detect_latency --faults 50 --nic tap --source bpf:linkwatch,rtnetlink --json\n"
      "  detect_latency --source tcp-inband --tcp-cap-ms 5000   # the in-band TCP baseline only\n"
      "Needs root (namespaces, tap, BPF). Exit 77 when BPF or tap is unavailable.");
  int faults = 200;
  int gapUs = 2000;
  int rtPriority = 10;
  int tcpCapMs = 3000;
  bool asJson = false, noStorm = false;
  std::vector<std::string> nics = {"veth", "tap"};
  std::vector<std::string> sources;
  app.add_option("--faults", faults, "faults per source and NIC")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--gap-us", gapUs, "pause after each fault's recovery (+0..1 ms jitter)")->capture_default_str();
  app.add_option("--nic", nics, "veth, tap")->delimiter(',');
  app.add_option("--source", sources, "bpf:linkwatch, bpf:qdisc_reset, rtnetlink, auto, tcp-inband (default: all)")
      ->delimiter(',');
  app.add_option("--tcp-cap-ms", tcpCapMs, "tcp-inband: deadline of one trial (counted as a timeout when hit)")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  app.add_flag("--no-storm", noStorm, "skip the flap-storm runs");
  app.add_option("--rt-priority", rtPriority, "SCHED_FIFO priority of the detector thread, 0 off")->capture_default_str();
  app.add_flag("--json", asJson, "print JSON instead of the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code() == 0 ? app.exit(e) : (app.exit(e), 64);
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "detect_latency: needs root (network namespaces, tap, BPF)\n");
    return 77;
  }
  logCaptureLibbpf();
  std::vector<SourceConfig> configs;
  for (const auto& c : allConfigs())
    if (sources.empty() || std::find(sources.begin(), sources.end(), c.name) != sources.end()) configs.push_back(c);
  bool wantTcp = sources.empty() || std::find(sources.begin(), sources.end(), "tcp-inband") != sources.end();
  if (configs.empty() && !wantTcp) {
    std::fprintf(stderr, "detect_latency: source: none of the given sources is known\n");
    return 64;
  }
  bool wantTap = std::find(nics.begin(), nics.end(), "tap") != nics.end();
  Lab lab(wantTap);
  if (!lab.ok()) {
    std::fprintf(stderr, "detect_latency: could not build the namespaces (ip netns/veth)\n");
    return 1;
  }
  // The kernel's link-watch runs non-urgent events at most once a second: start after it.
  usleep(1'100'000);
  std::vector<RunResult> results;
  for (const auto& nic : nics) {
    if (nic != "veth" && nic != "tap") {
      std::fprintf(stderr, "detect_latency: nic: expected veth or tap, got '%s'\n", nic.c_str());
      return 64;
    }
    if (nic == "tap" && !lab.tapOk()) {
      std::fprintf(stderr, "detect_latency: tap unavailable (/dev/net/tun), skipping\n");
      continue;
    }
    for (bool storm : {false, true}) {
      if (storm && noStorm) continue;
      for (const auto& cfg : configs) {
        if (!asJson) std::fprintf(stderr, "  %s %s %s ...\n", nic.c_str(), cfg.name.c_str(), storm ? "flap-storm" : "quiet");
        results.push_back(measure(lab, nic, cfg, faults, gapUs, storm, rtPriority));
      }
      if (wantTcp) {
        if (!lab.tcpOk(nic)) {
          std::fprintf(stderr, "detect_latency: %s: no addresses for the tcp baseline, skipping it\n", nic.c_str());
          continue;
        }
        if (!asJson) std::fprintf(stderr, "  %s tcp-inband %s ...\n", nic.c_str(), storm ? "flap-storm" : "quiet");
        results.push_back(measureTcp(lab, nic, faults, gapUs, storm, tcpCapMs));
      }
    }
  }
  char date[64];
  time_t now = time(nullptr);
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  if (asJson) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      nlohmann::json w = nlohmann::json::object();
      for (const auto& [k, v] : r.winners) w[k] = v;
      out.push_back({{"date", date}, {"nic", r.nic}, {"source", r.source}, {"scenario", r.scenario},
                     {"faults", r.faults}, {"detected", r.detected}, {"timeouts", r.timeouts},
                     {"other_source", r.otherSource}, {"first_source", w},
                     {"fault_to_callback_us", {{"p50", r.faultToCb.p50}, {"p99", r.faultToCb.p99}, {"max", r.faultToCb.max}}},
                     {"kernel_to_callback_us",
                      r.inBand ? nlohmann::json(nullptr)
                               : nlohmann::json{{"p50", r.kernelToCb.p50}, {"p99", r.kernelToCb.p99}, {"max", r.kernelToCb.max}}}});
      if (r.inBand) out.back()["cap_ms"] = tcpCapMs;
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("# detect_latency %s, %d faults per row; microseconds; tcp-inband: fault -> first RTO seen in TCP_INFO, "
              "capped at %d ms per trial (k->cb: none)\n",
              date, faults, tcpCapMs);
  std::printf("%-5s %-11s %-16s %6s %8s | %9s %9s %9s | %9s %9s %9s | %s\n", "nic", "scenario", "source", "faults",
              "timeouts", "f->cb p50", "p99", "max", "k->cb p50", "p99", "max", "first signal");
  for (const auto& r : results) {
    std::string w;
    for (const auto& [k, v] : r.winners) w += k + "=" + std::to_string(v) + " ";
    char k2c[64];
    if (r.inBand)
      std::snprintf(k2c, sizeof k2c, "%9s %9s %9s", "-", "-", "-");
    else
      std::snprintf(k2c, sizeof k2c, "%9.1f %9.1f %9.1f", r.kernelToCb.p50, r.kernelToCb.p99, r.kernelToCb.max);
    std::printf("%-5s %-11s %-16s %6d %8d | %9.1f %9.1f %9.1f | %s | %s\n", r.nic.c_str(), r.scenario.c_str(),
                r.source.c_str(), r.faults, r.timeouts, r.faultToCb.p50, r.faultToCb.p99, r.faultToCb.max, k2c,
                w.c_str());
  }
  return 0;
}
