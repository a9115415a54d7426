// The detector on a stock distribution kernel, run inside the lab (tools/lab/lab.sh): there the
// BPF trampolines load, and rdma_rxe gives an RDMA device whose port follows its netdev's
// carrier. Outside the lab (RECCL_TEST_LAB unset) every test skips.
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "reccl/common/deadline.h"
#include "reccl/common/log.h"
#include "reccl/detector/detector.h"

namespace reccl::detector {
namespace {

bool runCmd(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

std::string envOr(const char* name, const char* dflt) {
  const char* v = getenv(name);
  return v && *v ? v : dflt;
}

class Lab : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!getenv("RECCL_TEST_LAB")) GTEST_SKIP() << "runs in the stock-kernel lab: tools/lab/lab.sh (ctest -L lab)";
    if (geteuid() != 0) GTEST_SKIP() << "needs root: BPF";
    logCaptureLibbpf();
  }
};

// Signals as the sources report them, before the state machine (thread-safe copy).
struct SignalLog {
  std::mutex mu;
  std::vector<LinkSignal> sigs;
  void attach(Detector& d) {
    d.setSignalObserver([this](const LinkSignal& s, uint64_t) {
      std::lock_guard lk(mu);
      sigs.push_back(s);
      fprintf(stderr, "sig %s %s %s value=%llu\n", sourceName(s.source), kindName(s.kind), s.ifname.c_str(),
              (unsigned long long)s.value);
    });
  }
  // Waits until a signal of this source and kind for which `match` holds arrives.
  template <typename F>
  bool waitFor(LinkSource src, LinkKind kind, int ms, F match) {
    for (Deadline dl = Deadline::afterMs(ms); !dl.expired(); usleep(2000)) {
      std::lock_guard lk(mu);
      for (const auto& s : sigs)
        if (s.source == src && s.kind == kind && match(s)) return true;
    }
    return false;
  }
};

std::optional<LinkEvent> waitEventFor(Detector& d, LinkKey key, int ms) {
  for (Deadline dl = Deadline::afterMs(ms); !dl.expired();)
    for (auto& e : d.waitEvents(dl.remainingMsForPoll()))
      if (e.link == key) return e;
  return std::nullopt;
}

// The host (lab.sh) reads this line from the serial console and pulls or plugs the VM's cable.
// The in-process BPF detector with one hook (plus the verbs async source when rdma), rtnetlink
// off, a 200 ms hold-down, watching `dev` in this namespace.
DetectorOptions oneHookOptions(LinkSource source, const std::string& dev, bool rdma) {
  DetectorOptions o;
  o.mode = SourceMode::kBpf;
  o.bpf.sources = {source};
  o.rtnetlink = false;
  o.rdma = rdma;
  o.stateMachine.holdDownNs = 200'000'000;
  o.watch = {{"", dev}};
  return o;
}

void requestCable(bool up) {
  printf("\n@@lab-monitor set_link %s %s\n", envOr("RECCL_LAB_NIC_ID", "nic0").c_str(), up ? "on" : "off");
  fflush(stdout);
}

TEST_F(Lab, ProbePicksFentryOverTracepoints) {
  std::map<std::string, HookStatus> hooks;
  for (auto& h : BpfSource::probe(BpfOptions{})) {
    printf("hook %-22s %s %s\n", h.program.c_str(), h.active ? "active" : "inactive", h.reason.c_str());
    hooks[h.program] = h;
  }
  for (const char* p : {"fexit_carrier_off", "fexit_carrier_on", "fentry_ib_dispatch", "tp_qdisc_reset",
                        "linkwatch_queue", "linkwatch_ran"})
    EXPECT_TRUE(hooks[p].active) << p << ": " << hooks[p].reason;
  // The raw-tracepoint twins are fallbacks: not loaded where the BTF-typed ones are.
  EXPECT_FALSE(hooks["rawtp_qdisc_reset"].active);
  EXPECT_EQ(hooks["rawtp_qdisc_reset"].reason.rfind("not needed", 0), 0u) << hooks["rawtp_qdisc_reset"].reason;
  EXPECT_FALSE(hooks["rawtp_linkwatch_timer"].active) << "timer_start is hooked only where there is no scan";
  EXPECT_FALSE(hooks["rawtp_linkwatch_ran"].active);

  // A detector in auto mode runs the trampolines, and they fire on a carrier loss.
  const std::string a = "lf" + std::to_string(getpid()) + "a", b = "lf" + std::to_string(getpid()) + "b";
  ASSERT_TRUE(runCmd("ip link add " + a + " type veth peer name " + b));
  struct Del {
    std::string n;
    ~Del() { runCmd("ip link del " + n); }
  } del{a};
  ASSERT_TRUE(runCmd("ip link set " + a + " up") && runCmd("ip link set " + b + " up"));
  DetectorOptions o;
  o.mode = SourceMode::kAuto;
  o.rdma = false;
  o.watch = {{"", a}};
  auto det = Detector::create(o);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  Detector& d = *det.value();
  SignalLog log;
  log.attach(d);
  auto active = d.activeSources();
  EXPECT_TRUE(active.count(RECCL_LINK_SRC_FENTRY_CARRIER)) << "auto mode left the trampolines out";
  EXPECT_TRUE(active.count(RECCL_LINK_SRC_TP_QDISC_RESET));
  ASSERT_TRUE(d.start().ok());
  usleep(1'100'000);  // past link-watch's hold after the device came up
  LinkKey key{d.watched().at(0).key};
  ASSERT_TRUE(runCmd("ip link set " + b + " down"));
  auto ev = waitEventFor(d, key, 2000);
  ASSERT_TRUE(ev) << "no event for the carrier loss of " << a;
  const LinkEvent& e = *ev;
  EXPECT_EQ(e.type, LinkEventType::kLinkDown);
  EXPECT_EQ(e.kind, RECCL_LINK_KIND_CARRIER_DOWN);
  // Every hook that names the device counts its hit before the slot's compare-and-swap picks the
  // earliest: the trampoline ran even when another hook reported first.
  auto st = d.status();
  EXPECT_GT(st.counters.bpf.hookHits[RECCL_LINK_SRC_FENTRY_CARRIER], 0u);
  EXPECT_EQ(st.counters.bpf.scanRuns, 0u) << "with the carrier trampolines there is nothing to scan for";
  printf("auto mode: carrier loss reported by %s (hits: fentry %llu, linkwatch %llu, qdisc_reset %llu)\n",
         sourceName(e.source), (unsigned long long)st.counters.bpf.hookHits[RECCL_LINK_SRC_FENTRY_CARRIER],
         (unsigned long long)st.counters.bpf.hookHits[RECCL_LINK_SRC_RAWTP_LINKWATCH],
         (unsigned long long)st.counters.bpf.hookHits[RECCL_LINK_SRC_TP_QDISC_RESET]);
  RecordProperty("auto_source", sourceName(e.source));
}

// A real cable pull: qemu's set_link drops the virtio NIC's link, and the guest driver loses
// carrier through the same path as a physical NIC's (netif_carrier_off, link-watch).
TEST_F(Lab, VirtioCablePullFiresFentryCarrierHook) {
  const std::string nic = envOr("RECCL_LAB_NIC", "");
  if (nic.empty()) GTEST_SKIP() << "RECCL_LAB_NIC not set: no virtual cable to pull";
  DetectorOptions o = oneHookOptions(RECCL_LINK_SRC_FENTRY_CARRIER, nic, /*rdma=*/false);
  auto det = Detector::create(o);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  Detector& d = *det.value();
  ASSERT_TRUE(d.start().ok());
  LinkKey key{d.watched().at(0).key};
  usleep(1'100'000);

  uint64_t t0 = monotonicNs();
  requestCable(false);
  auto downEv = waitEventFor(d, key, 5000);  // the host polls the console every 50 ms
  ASSERT_TRUE(downEv) << "no carrier loss seen on " << nic;
  const LinkEvent& down = *downEv;
  EXPECT_EQ(down.source, RECCL_LINK_SRC_FENTRY_CARRIER);
  EXPECT_EQ(down.type, LinkEventType::kLinkDown);
  EXPECT_EQ(down.kind, RECCL_LINK_KIND_CARRIER_DOWN);
  EXPECT_EQ(down.ifname, nic);
  EXPECT_GE(down.signalNs, t0);

  requestCable(true);
  auto upEv = waitEventFor(d, key, 5000);
  ASSERT_TRUE(upEv) << "no LinkUp after the cable was plugged back";
  const LinkEvent& up = *upEv;
  EXPECT_EQ(up.type, LinkEventType::kLinkUp);
  EXPECT_EQ(up.source, RECCL_LINK_SRC_FENTRY_CARRIER);
  EXPECT_GE(up.emitNs - up.signalNs, 200'000'000u) << "LinkUp before the hold-down ended";
  EXPECT_EQ(d.status().counters.bpf.ringbufDrops, 0u);
}

// rxe on a veth: the RDMA port goes down with the netdev's carrier. Both the trampoline on
// ib_dispatch_event and the verbs async event reach the detector; the async one names the netdev,
// so it alone (rtnetlink off) takes the watched link down.
TEST_F(Lab, RxePortDownReachesIbDispatchHookAndAsyncEvents) {
  const std::string tag = std::to_string(getpid());
  const std::string a = "lr" + tag + "a", b = "lr" + tag + "b", rxe = "rxe" + tag;
  ASSERT_TRUE(runCmd("ip link add " + a + " type veth peer name " + b));
  struct Cleanup {
    std::string rxe, a;
    ~Cleanup() {
      runCmd("rdma link delete " + rxe);
      runCmd("ip link del " + a);
    }
  } cleanup{rxe, a};
  ASSERT_TRUE(runCmd("ip link set " + a + " up") && runCmd("ip link set " + b + " up"));
  ASSERT_TRUE(runCmd("rdma link add " + rxe + " type rxe netdev " + a)) << "rdma_rxe not loaded?";
  const std::string portState = "/sys/class/infiniband/" + rxe + "/ports/1/state";
  auto portIs = [&](const char* want) {
    std::ifstream f(portState);
    std::string s;
    std::getline(f, s);
    return s.find(want) != std::string::npos;
  };
  for (Deadline dl = Deadline::afterMs(3000); !portIs("ACTIVE") && !dl.expired();) usleep(5000);
  ASSERT_TRUE(portIs("ACTIVE")) << portState;

  DetectorOptions o = oneHookOptions(RECCL_LINK_SRC_FENTRY_IB_DISPATCH, a, /*rdma=*/true);
  auto det = Detector::create(o);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  Detector& d = *det.value();
  EXPECT_TRUE(d.activeSources().count(RECCL_LINK_SRC_RDMA_ASYNC)) << "no verbs device opened";
  SignalLog log;
  log.attach(d);
  ASSERT_TRUE(d.start().ok());
  LinkKey key{d.watched().at(0).key};
  const uint32_t ifindex = if_nametoindex(a.c_str());

  ASSERT_TRUE(runCmd("ip link set " + b + " down"));
  EXPECT_TRUE(log.waitFor(RECCL_LINK_SRC_FENTRY_IB_DISPATCH, RECCL_LINK_KIND_RDMA_PORT_ERR, 3000,
                          [&](const LinkSignal& s) { return s.ifname == rxe && s.value == 1; }))
      << "fentry on ib_dispatch_event saw no port error of " << rxe;
  EXPECT_TRUE(log.waitFor(RECCL_LINK_SRC_RDMA_ASYNC, RECCL_LINK_KIND_RDMA_PORT_ERR, 3000,
                          [&](const LinkSignal& s) { return s.link.ifindex == ifindex && s.ifname == a; }))
      << "no verbs async port error for " << a;
  auto downEv = waitEventFor(d, key, 3000);
  ASSERT_TRUE(downEv) << "the port error did not take " << a << " down";
  const LinkEvent& down = *downEv;
  EXPECT_EQ(down.type, LinkEventType::kLinkDown);
  EXPECT_EQ(down.source, RECCL_LINK_SRC_RDMA_ASYNC);
  EXPECT_TRUE(portIs("DOWN")) << portState;

  ASSERT_TRUE(runCmd("ip link set " + b + " up"));
  EXPECT_TRUE(log.waitFor(RECCL_LINK_SRC_FENTRY_IB_DISPATCH, RECCL_LINK_KIND_RDMA_PORT_ACTIVE, 3000,
                          [&](const LinkSignal& s) { return s.ifname == rxe; }));
  auto upEv = waitEventFor(d, key, 3000);
  ASSERT_TRUE(upEv) << "no LinkUp after the port came back";
  const LinkEvent& up = *upEv;
  EXPECT_EQ(up.type, LinkEventType::kLinkUp);
  EXPECT_EQ(up.source, RECCL_LINK_SRC_RDMA_ASYNC);
}

}  // namespace
}  // namespace reccl::detector
