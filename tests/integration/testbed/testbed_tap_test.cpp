// Tap mode: rail NICs whose carrier is driven by TUNSETCARRIER (the driver path of a physical
// NIC), joined to the rail bridges by the testbed's forwarder.
#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/nl_socket.h"
#include "reccl/netlink/tap.h"
#include "reccl/testbed/tap_forwarder.h"
#include "testbed_fixture.h"

namespace {

using reccl::netlink::NlSocket;
using reccl::test::NicKind;
using reccl::test::TestbedTest;

class TapTestbed : public TestbedTest<2, 2, NicKind::kTap> {
 protected:
  static NlSocket socketIn(const std::string& netns) {
    auto s = NlSocket::openInNetns(netns);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }
  // Carrier of a device, waited for up to 10 s (a loaded machine) to become `want` (the
  // forwarder mirrors carrier asynchronously; the kernel's linkwatch work may lag too).
  static bool carrierBecomes(const std::string& netns, const std::string& dev, bool want) {
    NlSocket nl = socketIn(netns);
    auto dl = reccl::Deadline::afterMs(10000);
    for (;;) {
      auto l = reccl::netlink::getLink(nl, dev);
      if (l.ok() && l->carrier == want) return true;
      if (dl.expired()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  static bool pingEventually(int from, int to, int rail) {
    auto dl = reccl::Deadline::afterMs(10000);
    while (!dl.expired()) {
      if (ping(from, to, rail, 56, 1)) return true;
    }
    return false;
  }
  static void setUp(const std::string& netns, const std::string& dev, bool up) {
    NlSocket nl = socketIn(netns);
    auto s = reccl::netlink::setLinkUp(nl, dev, up);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
};

TEST_F(TapTestbed, RailNicsAreTapsAndPassTrafficWithJumboFrames) {
  NlSocket h0 = socketIn(netns(0));
  auto l = reccl::netlink::getLink(h0, "rail0");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->kind, "tun");
  EXPECT_EQ(l->mtu, 9000u);
  for (int rail = -1; rail < 2; ++rail) {
    EXPECT_TRUE(ping(0, 1, rail)) << "rail " << rail;
    EXPECT_TRUE(ping(1, 0, rail)) << "rail " << rail;
    EXPECT_TRUE(ping(0, 1, rail, 8972)) << "rail " << rail;
  }
}

TEST_F(TapTestbed, CarrierOffThroughASecondQueueStopsTrafficAndCarrierOnRestoresIt) {
  ASSERT_TRUE(ping(0, 1, 0));
  // A second queue held open: TUNSETCARRIER through it drops the device's carrier.
  {
    auto q = reccl::netlink::attachTapQueue(netns(1), "rail0");
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    ASSERT_TRUE(reccl::netlink::setTapCarrier(q->get(), false).ok());
    EXPECT_TRUE(carrierBecomes(netns(1), "rail0", false));
  }
  // ...and it stays off after that queue is gone (the forwarder's queue keeps the device).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(carrierBecomes(netns(1), "rail0", false));
  // The cable is dead both ways: the switch port loses carrier too, no frame crosses.
  EXPECT_TRUE(carrierBecomes(fabricNetns(), "h1r0", false));
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  EXPECT_FALSE(ping(1, 0, 0, 56, 1));
  EXPECT_TRUE(ping(0, 1, 1)) << "rail 1 must not be affected";
  EXPECT_TRUE(ping(1, 0, -1)) << "mgmt must not be affected";

  // The one-shot form (attach, disable queue, set, close) brings it back.
  auto s = reccl::netlink::setTapCarrier(netns(1), "rail0", true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(carrierBecomes(netns(1), "rail0", true));
  EXPECT_TRUE(carrierBecomes(fabricNetns(), "h1r0", true));
  EXPECT_TRUE(pingEventually(0, 1, 0));
  EXPECT_TRUE(pingEventually(1, 0, 0));
}

TEST_F(TapTestbed, OneShotCarrierOffLeavesNoQueueThatStrandsFrames) {
  // After a one-shot carrier flip the device has only the forwarder's queue again: every flow
  // keeps passing (a stranded queue would swallow the flows hashed onto it).
  ASSERT_TRUE(reccl::netlink::setTapCarrier(netns(0), "rail1", false).ok());
  ASSERT_TRUE(reccl::netlink::setTapCarrier(netns(0), "rail1", true).ok());
  EXPECT_TRUE(carrierBecomes(netns(0), "rail1", true));
  EXPECT_TRUE(pingEventually(0, 1, 1));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(ping(0, 1, 1)) << "ping " << i;
}

TEST_F(TapTestbed, SwitchPortDownDropsTheHostNicCarrier) {
  setUp(fabricNetns(), "h0r1", false);
  EXPECT_TRUE(carrierBecomes(netns(0), "rail1", false));
  EXPECT_FALSE(ping(1, 0, 1, 56, 1));
  EXPECT_TRUE(ping(1, 0, 0));
  setUp(fabricNetns(), "h0r1", true);
  EXPECT_TRUE(carrierBecomes(netns(0), "rail1", true));
  EXPECT_TRUE(pingEventually(1, 0, 1));
}

TEST_F(TapTestbed, HostNicDownDropsTheSwitchPortCarrier) {
  setUp(netns(1), "rail1", false);
  EXPECT_TRUE(carrierBecomes(fabricNetns(), "h1r1", false));
  EXPECT_FALSE(ping(0, 1, 1, 56, 1));
  EXPECT_TRUE(ping(0, 1, 0));
  setUp(netns(1), "rail1", true);
  EXPECT_TRUE(carrierBecomes(fabricNetns(), "h1r1", true));
  EXPECT_TRUE(pingEventually(0, 1, 1));
}

TEST(TapTestbedLifecycle, DownStopsTheForwarder) {
  std::string why = reccl::test::testbedSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  reccl::test::TestbedSpec spec;
  spec.hosts = 2;
  spec.rails = 1;
  spec.nic = NicKind::kTap;
  auto tb = reccl::test::ScopedTestbed::create(spec);
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  const pid_t fwd = (*tb)->state().forwarderPid;
  const uint64_t ticks = (*tb)->state().forwarderStartTicks;
  ASSERT_GT(fwd, 0);
  EXPECT_EQ(reccl::testbed::processStartTicks(fwd), ticks);
  tb->reset();
  EXPECT_EQ(reccl::testbed::processStartTicks(fwd), 0u) << "forwarder " << fwd << " still runs";
}

}  // namespace

namespace {

using reccl::test::NicKind;

// After a crash that lost the state record, `down` still finds the forwarder (it lives in the
// fabric namespace); left running, its queues would keep every namespace of the testbed alive.
TEST(TapTestbedLifecycle, DownWithoutTheStateRecordStillStopsTheForwarder) {
  std::string why = reccl::test::testbedSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  reccl::test::TestbedSpec spec;
  spec.hosts = 2;
  spec.rails = 1;
  spec.nic = NicKind::kTap;
  auto tb = reccl::test::ScopedTestbed::create(spec);
  ASSERT_TRUE(tb.ok()) << tb.status().ToString();
  const pid_t fwd = (*tb)->state().forwarderPid;
  ASSERT_GT(fwd, 0);
  ASSERT_EQ(reccl::testbed::removeState((*tb)->name()).code(), reccl::Errc::kOk);
  auto rep = reccl::testbed::Testbed::down((*tb)->name());
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(reccl::testbed::processStartTicks(fwd), 0u) << "forwarder " << fwd << " still runs";
}

}  // namespace
