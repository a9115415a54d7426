// Detection latency of each source, side by side: a real fault (veth peer down over rtnetlink,
// or TUNSETCARRIER on a tap, the driver-side path a physical NIC takes) is injected N times;
// each LinkDown reaching the subscriber callback is timed from the fault syscall and from the
// kernel timestamp of its first signal. Then the same under a flap storm on another link.
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
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
    if (wantTap) {
      for (int i = 0; i < 2; ++i) {
        std::string name = "tap" + std::to_string(i);
        int fd = -1;
        std::thread t([&] {
          if (setns(hostNs_.fd.get(), CLONE_NEWNET) != 0) return;
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
        tapFds_[i] = fd;
        if (fd < 0 || !sh("ip -n " + host_ + " link set " + name + " up")) tapOk_ = false;
      }
    }
  }
  ~Lab() {
    for (int fd : tapFds_)
      if (fd >= 0) close(fd);
    sh("ip netns del " + host_);
    sh("ip netns del " + sw_);
  }
  bool ok() const { return ok_; }
  bool tapOk() const { return tapOk_ && tapFds_[0] >= 0; }
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
  std::string host_, sw_;
  Netns hostNs_, swNs_;
  int tapFds_[2] = {-1, -1};
  bool ok_ = false, tapOk_ = true;
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

  std::atomic<bool> stop{false};
  std::thread stormer;
  if (storm) {
    // The other rail flaps every 500 us for the whole run.
    stormer = std::thread([&] {
      bool up = false;
      while (!stop.load()) {
        (up ? stormLink->up() : stormLink->down());
        up = !up;
        usleep(500);
      }
      stormLink->up();
    });
  }
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
  stop = true;
  if (stormer.joinable()) stormer.join();
  r.faultToCb = stats(f2c);
  r.kernelToCb = stats(k2c);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"detect_latency: link-fault detection latency per source, on veth and tap"};
  app.footer(
      "EXAMPLES:\n"
      "  detect_latency                                  # 200 faults per source, veth and tap\n"
      "  detect_latency --faults 50 --nic tap --source bpf:linkwatch,rtnetlink --json\n"
      "Needs root (namespaces, tap, BPF). Exit 77 when BPF or tap is unavailable.");
  int faults = 200;
  int gapUs = 2000;
  int rtPriority = 10;
  bool asJson = false, noStorm = false;
  std::vector<std::string> nics = {"veth", "tap"};
  std::vector<std::string> sources;
  app.add_option("--faults", faults, "faults per source and NIC")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--gap-us", gapUs, "pause after each fault's recovery (+0..1 ms jitter)")->capture_default_str();
  app.add_option("--nic", nics, "veth, tap")->delimiter(',');
  app.add_option("--source", sources, "bpf:linkwatch, bpf:qdisc_reset, rtnetlink, auto (default: all)")->delimiter(',');
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
  if (configs.empty()) {
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
                     {"kernel_to_callback_us", {{"p50", r.kernelToCb.p50}, {"p99", r.kernelToCb.p99}, {"max", r.kernelToCb.max}}}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("# detect_latency %s, %d faults per row; microseconds\n", date, faults);
  std::printf("%-5s %-11s %-16s %6s %8s | %9s %9s %9s | %9s %9s %9s | %s\n", "nic", "scenario", "source", "faults",
              "timeouts", "f->cb p50", "p99", "max", "k->cb p50", "p99", "max", "first signal");
  for (const auto& r : results) {
    std::string w;
    for (const auto& [k, v] : r.winners) w += k + "=" + std::to_string(v) + " ";
    std::printf("%-5s %-11s %-16s %6d %8d | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | %s\n", r.nic.c_str(),
                r.scenario.c_str(), r.source.c_str(), r.faults, r.timeouts, r.faultToCb.p50, r.faultToCb.p99,
                r.faultToCb.max, r.kernelToCb.p50, r.kernelToCb.p99, r.kernelToCb.max, w.c_str());
  }
  return 0;
}
