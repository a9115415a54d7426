// Gray failures from the tc BPF program, measured with real UDP traffic counted at the receiver
// and cross-checked with the program's own counters.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>

#include "inject_test_util.h"
#include "reccl/inject/fault_session.h"
#include "reccl/netlink/netns.h"
#include "testbed_fixture.h"
#include "udp_traffic.h"

using namespace reccl;
using namespace reccl::test;
using inject::DropRule;
using inject::Side;
using inject::Target;

namespace {

class InjectDropTest : public TestbedTest<2, 1> {
 protected:
  void SetUp() override {
    TestbedTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Warm ARP both ways so that the first datagrams are not queued behind resolution.
    ASSERT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1) && ping(1, 0, 0, 56, 1); }));
  }
  void TearDown() override {
    if (tb_) {
      (void)inject::clearTarget({netns(0), "rail0", Side::kHost}, false);
      (void)inject::clearTarget({netns(1), "rail0", Side::kHost}, false);
    }
  }
  static DropRule rule(double rate, uint32_t dirs, const std::string& flow = "*") {
    DropRule r;
    r.rate = rate;
    r.dirs = dirs;
    r.flow = inject::parseFlow(flow).value();
    return r;
  }
  // Sends n datagrams host `from` -> host `to` on rail0 and returns how many arrived.
  static uint64_t transfer(int from, int to, uint16_t port, uint64_t n, uint16_t sport = 0) {
    UdpReceiver rx;
    Status st = rx.start(netns(to), railAddr(to, 0), port);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto sent = sendUdp(netns(from), railAddr(to, 0), port, n, sport);
    EXPECT_TRUE(sent.ok()) << sent.status().ToString();
    EXPECT_EQ(sent.ok() ? *sent : 0, n) << "sendto refused datagrams";
    return rx.finish(n);
  }
};

TEST_F(InjectDropTest, OnePercentDropGivesOnePercentLoss) {
  constexpr uint64_t kN = 20000;
  constexpr double kP = 0.01;
  Target t{netns(0), "rail0", Side::kHost};
  auto slot = inject::injectDrop(t, rule(kP, inject::kEgress), false);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  uint64_t received = transfer(0, 1, 5000, kN);
  uint64_t lost = kN - received;
  // Binomial(n, p): sigma = sqrt(n p (1-p)) ~ 14 packets; +-4 sigma is a 1-in-15000 false alarm.
  double sigma = std::sqrt(kN * kP * (1 - kP));
  double expected = kN * kP;
  std::printf("drop rate %.3f over %llu datagrams: lost %llu (%.3f%%), expected %.0f +- %.0f (4 sigma)\n",
              kP, static_cast<unsigned long long>(kN), static_cast<unsigned long long>(lost),
              100.0 * static_cast<double>(lost) / kN, expected, 4 * sigma);
  EXPECT_NEAR(static_cast<double>(lost), expected, 4 * sigma);
  auto stats = inject::readDropStats(t, false);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->rules.size(), 1u);
  const auto& c = stats->rules[0].counters;
  // The rule also sees the odd ARP packet; the receiver saw every datagram it did not drop.
  EXPECT_GE(c.seen, kN);
  EXPECT_LE(c.seen, kN + 20);
  EXPECT_GE(c.dropped, lost);
  EXPECT_LE(c.dropped, lost + 3) << "the program dropped packets the receiver still got?";
}

TEST_F(InjectDropTest, FlowFilterLeavesOtherFlowsUntouched) {
  constexpr uint64_t kN = 3000;
  Target t{netns(0), "rail0", Side::kHost};
  std::string flow = "udp:*:*:" + railAddr(1, 0) + ":5101";
  ASSERT_TRUE(inject::injectDrop(t, rule(1.0, inject::kEgress, flow), false).ok());
  EXPECT_EQ(transfer(0, 1, 5101, kN), 0u) << "the filtered flow was not dropped";
  EXPECT_EQ(transfer(0, 1, 5102, kN), kN) << "another flow to the same host lost packets";
  EXPECT_TRUE(ping(0, 1, 0, 56, 2)) << "icmp must pass a udp flow filter";
  auto stats = inject::readDropStats(t, false);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->rules.size(), 1u);
  EXPECT_EQ(stats->rules[0].counters.seen, kN);
  EXPECT_EQ(stats->rules[0].counters.dropped, kN);
}

TEST_F(InjectDropTest, SourcePortFilter) {
  constexpr uint64_t kN = 2000;
  Target t{netns(1), "rail0", Side::kHost};
  // Ingress on the receiving host: only datagrams from source port 7001 vanish.
  ASSERT_TRUE(inject::injectDrop(t, rule(1.0, inject::kIngress, "udp:*:7001:*:*"), false).ok());
  EXPECT_EQ(transfer(0, 1, 5201, kN, 7001), 0u);
  EXPECT_EQ(transfer(0, 1, 5202, kN, 7002), kN);
}

TEST_F(InjectDropTest, BlackholeEgressDropsOneDirectionOnly) {
  constexpr uint64_t kN = 3000;
  Target t{netns(0), "rail0", Side::kHost};
  ASSERT_TRUE(inject::injectDrop(t, rule(1.0, inject::kEgress), false).ok());
  EXPECT_EQ(transfer(0, 1, 5301, kN), 0u) << "egress blackhole let packets out";
  EXPECT_EQ(transfer(1, 0, 5302, kN), kN) << "egress blackhole dropped incoming packets";
  auto stats = inject::readDropStats(t, false);
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->ingressAll.seen, kN);
  EXPECT_EQ(stats->ingressAll.dropped, 0u);
}

TEST_F(InjectDropTest, SwitchSideIngressDropIsLossOnTheWire) {
  constexpr uint64_t kN = 3000;
  // Dropped at the switch port: the sender's stack sees success, like loss on a real cable.
  Target t{netns(0), "rail0", Side::kSwitch};
  ASSERT_TRUE(inject::injectDrop(t, rule(1.0, inject::kIngress, "udp:*:*:*:5401"), false).ok());
  EXPECT_TRUE(inject::faultDropPinned(fabricNetns(), "h0r0"));
  EXPECT_EQ(transfer(0, 1, 5401, kN), 0u);
  ASSERT_TRUE(inject::clearTarget({netns(0), "rail0", Side::kHost}, false).ok());
  EXPECT_TRUE(dropProgramGone(fabricNetns(), "h0r0"));
  EXPECT_EQ(transfer(0, 1, 5401, kN), kN);
}

TEST_F(InjectDropTest, RateChangesLiveWithoutReload) {
  constexpr uint64_t kN = 2000;
  Target t{netns(0), "rail0", Side::kHost};
  auto first = inject::injectDrop(t, rule(0.0, inject::kEgress), false);
  ASSERT_TRUE(first.ok());
  auto dir = inject::faultDropPinDir(netns(0), "rail0");
  struct stat before {};
  ASSERT_EQ(::stat((dir + "/prog_egress").c_str(), &before), 0);
  EXPECT_EQ(transfer(0, 1, 5501, kN), kN);
  auto second = inject::injectDrop(t, rule(1.0, inject::kEgress), false);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first) << "a rate change must update the same rule slot";
  EXPECT_EQ(transfer(0, 1, 5502, kN), 0u);
  struct stat after {};
  ASSERT_EQ(::stat((dir + "/prog_egress").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "the program was re-pinned (reloaded)";
}

TEST_F(InjectDropTest, ClearRemovesFilterPinsAndQdisc) {
  Target t{netns(0), "rail0", Side::kHost};
  ASSERT_TRUE(inject::injectDrop(t, rule(1.0, inject::kBothDirections), false).ok());
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  auto present = inject::faultDropFilterPresent(netns(0), "rail0");
  ASSERT_TRUE(present.ok() && *present);
  ASSERT_TRUE(inject::clearTarget(t, false).ok());
  EXPECT_TRUE(dropProgramGone(netns(0), "rail0"));
  auto q = testbed().run(0, {"tc", "qdisc", "show", "dev", "rail0"});
  EXPECT_EQ(q.out.find("clsact"), std::string::npos) << q.out;
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); }));
}

}  // namespace

namespace {

TEST_F(InjectDropTest, PinsOfAVanishedNamespaceAreSweptByTheNextAttach) {
  // A namespace with a drop program that dies without `clear` (as after a crashed run).
  std::string ns = "rij" + std::to_string(::getpid());
  struct NetnsCleanup {
    std::string name;
    ~NetnsCleanup() {
      if (netlink::netnsExists(name)) (void)netlink::deleteNetns(name);
      (void)inject::detachFaultDrop(name, "va");
    }
  } cleanup{ns};
  ASSERT_TRUE(netlink::createNetns(ns).ok());
  {
    auto nl = netlink::NlSocket::openInNetns(ns);
    ASSERT_TRUE(nl.ok());
    ASSERT_TRUE(netlink::createVethPair(*nl, {"va", -1}, {"vb", -1}).ok());
    ASSERT_TRUE(netlink::setLinkUp(*nl, "va", true).ok());
  }
  Status made = inject::injectDrop({ns, "va", Side::kHost}, rule(0.5, inject::kEgress), false).status();
  EXPECT_TRUE(made.ok()) << made.ToString();
  EXPECT_TRUE(inject::faultDropPinned(ns, "va"));
  ASSERT_TRUE(netlink::deleteNetns(ns).ok());
  ASSERT_TRUE(inject::injectDrop({netns(0), "rail0", Side::kHost}, rule(0.0, inject::kEgress), false).ok());
  EXPECT_FALSE(inject::faultDropPinned(ns, "va")) << "stale pins survived the sweep";
  struct stat st {};
  EXPECT_NE(::stat((std::string(inject::kPinRoot) + "/" + ns).c_str(), &st), 0);
}

}  // namespace
