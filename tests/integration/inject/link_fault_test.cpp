// Link faults judged from outside: traffic between two testbed hosts stops when a NIC or its
// switch port goes down (or a tap loses carrier) and comes back when it is restored.
#include <gtest/gtest.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "inject_test_util.h"
#include "reccl/inject/fault_session.h"
#include "reccl/inject/plan_runner.h"
#include "reccl/common/unique_fd.h"
#include "reccl/netlink/netns_guard.h"
#include "testbed_fixture.h"

using namespace reccl;
using namespace reccl::test;
using inject::Side;
using inject::Target;

namespace {

class InjectLinkTest : public TestbedTest<2, 2> {
 protected:
  // Ping on a rail until it answers (ARP after a link change may take a moment) or 5 s pass.
  static bool railWorks(int rail) {
    return eventually([&] { return ping(0, 1, rail, 56, 1); }, std::chrono::seconds(5));
  }
};

TEST_F(InjectLinkTest, HostSideDownStopsTrafficOnThatRailOnly) {
  ASSERT_TRUE(railWorks(0));
  Target t{netns(0), "rail0", Side::kHost};
  ASSERT_TRUE(inject::injectLinkAdmin(t, false, false).ok());
  auto info = linkInfo(netns(0), "rail0");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->adminUp());
  EXPECT_FALSE(ping(0, 1, 0, 56, 1)) << "traffic still flows over a downed nic";
  EXPECT_TRUE(ping(0, 1, 1, 56, 2)) << "the other rail must not be affected";
  ASSERT_TRUE(inject::injectLinkAdmin(t, true, false).ok());
  EXPECT_TRUE(railWorks(0)) << "traffic did not resume after link-up";
}

TEST_F(InjectLinkTest, SwitchSideDownDropsTheHostNicsCarrier) {
  ASSERT_TRUE(railWorks(1));
  Target t{netns(0), "rail1", Side::kSwitch};
  auto resolved = inject::resolveTarget(t, false);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->netns, fabricNetns());
  EXPECT_EQ(resolved->dev, "h0r1");
  ASSERT_TRUE(inject::injectLinkAdmin(t, false, false).ok());
  // The host NIC stays admin up but loses its carrier: the cable-pulled view a host has.
  EXPECT_TRUE(eventually([&] {
    auto l = linkInfo(netns(0), "rail1");
    return l.ok() && l->adminUp() && !l->carrier;
  }));
  auto port = linkInfo(fabricNetns(), "h0r1");
  ASSERT_TRUE(port.ok());
  EXPECT_FALSE(port->adminUp());
  EXPECT_FALSE(ping(0, 1, 1, 56, 1));
  EXPECT_TRUE(ping(0, 1, 0, 56, 2));
  ASSERT_TRUE(inject::injectLinkAdmin(t, true, false).ok());
  EXPECT_TRUE(railWorks(1));
}

TEST_F(InjectLinkTest, ClearBringsBothEndsOfTheCableUp) {
  ASSERT_TRUE(inject::injectLinkAdmin({netns(1), "rail0", Side::kHost}, false, false).ok());
  ASSERT_TRUE(inject::injectLinkAdmin({netns(1), "rail0", Side::kSwitch}, false, false).ok());
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  ASSERT_TRUE(inject::clearTarget({netns(1), "rail0", Side::kHost}, false).ok());
  EXPECT_TRUE(linkRunning(netns(1), "rail0") ||
              eventually([&] { return linkRunning(netns(1), "rail0"); }));
  EXPECT_TRUE(railWorks(0));
}

TEST_F(InjectLinkTest, RefusesManagementNicRootNamespaceAndUnknownNames) {
  auto mgmt = inject::injectLinkAdmin({netns(0), "mgmt0", Side::kHost}, false, false);
  EXPECT_EQ(mgmt.code(), Errc::kPermission) << mgmt.ToString();
  // The mgmt switch port is just as protected, named directly in the fabric.
  auto mgmtPort = inject::injectLinkAdmin({fabricNetns(), "h0m", Side::kHost}, false, false);
  EXPECT_EQ(mgmtPort.code(), Errc::kPermission) << mgmtPort.ToString();
  auto root = inject::injectLinkAdmin({"", "lo", Side::kHost}, false, false);
  EXPECT_EQ(root.code(), Errc::kPermission) << root.ToString();
  auto ns = inject::injectLinkAdmin({"reccl-no-such-ns", "rail0", Side::kHost}, false, false);
  EXPECT_EQ(ns.code(), Errc::kNotFound);
  auto dev = inject::injectLinkAdmin({netns(0), "rail9", Side::kHost}, false, false);
  EXPECT_EQ(dev.code(), Errc::kNotFound);
  EXPECT_TRUE(linkRunning(netns(0), "mgmt0"));
  EXPECT_TRUE(ping(0, 1, -1, 56, 2)) << "management network must be untouched";
}

class InjectTapTest : public TestbedTest<2, 1, testbed::NicKind::kTap> {};

TEST_F(InjectTapTest, CarrierOffStopsTrafficAndCarrierOnResumes) {
  ASSERT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); })) << "tap rail does not pass traffic";
  auto before = linkInfo(netns(0), "rail0");
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->kind, "tun");
  Target t{netns(0), "rail0", Side::kHost};
  ASSERT_TRUE(inject::injectCarrier(t, false, false).ok());
  EXPECT_TRUE(eventually([&] {
    auto l = linkInfo(netns(0), "rail0");
    return l.ok() && l->adminUp() && !l->carrier;
  })) << "carrier still on after TUNSETCARRIER off";
  EXPECT_FALSE(ping(0, 1, 0, 56, 1));
  ASSERT_TRUE(inject::injectCarrier(t, true, false).ok());
  EXPECT_TRUE(eventually([&] { return linkRunning(netns(0), "rail0"); }));
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); })) << "traffic did not resume";
}

// Outside the lab and inside it alike (a veth in a named namespace is no lab VM's cable): refused,
// the device named, its carrier untouched.
TEST_F(InjectTapTest, CarrierOnAVethIsRefused) {
  auto st = inject::injectCarrier({netns(0), "mgmt0", Side::kHost}, false, true);
  EXPECT_EQ(st.code(), Errc::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(netns(0) + "/mgmt0"), std::string::npos) << st.message();
  const char* old = getenv("RECCL_TEST_LAB");
  const std::string saved = old ? old : "";
  setenv("RECCL_TEST_LAB", "1", 1);
  auto inLab = inject::injectCarrier({netns(0), "mgmt0", Side::kHost}, false, true);
  if (old) setenv("RECCL_TEST_LAB", saved.c_str(), 1);
  else unsetenv("RECCL_TEST_LAB");
  EXPECT_EQ(inLab.code(), Errc::kInvalidArgument) << inLab.ToString();
  EXPECT_TRUE(linkRunning(netns(0), "mgmt0"));
}

}  // namespace

namespace {

class InjectTapPlanTest : public TestbedTest<2, 1, testbed::NicKind::kTap> {};

TEST_F(InjectTapPlanTest, CarrierOffWithDurationIsUndoneByThePlan) {
  ASSERT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); }));
  inject::FaultPlan plan;
  inject::PlanAction off;
  off.kind = inject::ActionKind::kCarrierOff;
  off.target = {netns(1), "rail0", Side::kHost};
  off.atMs = 0;
  // Long enough that the watcher's 1 s ping ends before the plan restores the carrier, also when
  // a loaded machine makes it see the carrier go late.
  off.durationMs = 5000;
  plan.actions.push_back(off);
  std::atomic<bool> sawOff{false}, pingFailed{false};
  std::thread watcher([&] {
    // While the plan runs: the carrier must go and traffic must stop.
    sawOff = eventually([&] {
      auto l = linkInfo(netns(1), "rail0");
      return l.ok() && !l->carrier;
    }, std::chrono::milliseconds(2500));
    if (sawOff) pingFailed = !ping(0, 1, 0, 56, 1);
  });
  auto res = inject::runPlan(plan, inject::PlanRunOptions{});
  watcher.join();
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->failed, 0);
  ASSERT_EQ(res->records.size(), 2u);
  EXPECT_TRUE(res->records[1].undo);
  EXPECT_TRUE(sawOff) << "carrier did not drop during the plan";
  EXPECT_TRUE(pingFailed) << "traffic crossed a tap without carrier";
  EXPECT_TRUE(eventually([&] { return linkRunning(netns(1), "rail0"); })) << "carrier not restored";
  EXPECT_TRUE(eventually([&] { return ping(0, 1, 0, 56, 1); }));
}

// What rtnetlink listeners hear of a tap's carrier actions in a plan. A plan that holds its tap
// queues changes the carrier with one TUNSETCARRIER each, so the only RTM_NEWLINKs of the NIC are
// link-watch's reports (at most one per change, fewer when it folds a short one), as with a
// physical NIC's driver; one-shot actions also send one for each queue they attach and close.
class LinkEventCounter {
 public:
  LinkEventCounter(const std::string& netns, int ifindex) : ifindex_(ifindex) {
    auto guard = netlink::NetnsGuard::enter(netns);
    EXPECT_TRUE(guard.ok()) << guard.status().ToString();
    fd_.reset(::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK;
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  }
  // RTM_NEWLINKs of the NIC from now until `ms` have passed without one.
  int countUntilQuietFor(int ms) {
    int n = 0;
    alignas(nlmsghdr) char buf[65536];
    for (;;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, ms) <= 0) return n;
      ssize_t got = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (got <= 0) return n;
      int len = static_cast<int>(got);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len))
        if (h->nlmsg_type == RTM_NEWLINK && static_cast<const ifinfomsg*>(NLMSG_DATA(h))->ifi_index == ifindex_) ++n;
    }
  }

 private:
  UniqueFd fd_;
  int ifindex_;
};

TEST_F(InjectTapPlanTest, AHeldQueueLeavesTheCarrierToLinkWatch) {
  auto info = linkInfo(netns(1), "rail0");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  // Three drops of 100 ms, 200 ms apart: six carrier changes.
  inject::FaultPlan plan;
  for (int i = 0; i < 3; ++i) {
    inject::PlanAction off;
    off.kind = inject::ActionKind::kCarrierOff;
    off.target = {netns(1), "rail0", Side::kHost};
    off.atMs = 200 * i;
    off.durationMs = 100;
    plan.actions.push_back(off);
  }
  int heard[2] = {0, 0};
  for (bool hold : {false, true}) {
    LinkEventCounter counter(netns(1), info->ifindex);
    counter.countUntilQuietFor(1200);  // what came before
    inject::PlanRunOptions opts;
    opts.holdTapQueues = hold;
    opts.realtime = false;
    auto res = inject::runPlan(plan, opts);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->failed, 0);
    heard[hold] = counter.countUntilQuietFor(1500);
    EXPECT_TRUE(eventually([&] { return linkRunning(netns(1), "rail0"); })) << "carrier not restored";
  }
  // The held queue's own attach (before the plan's T0, counted with "what came before" only when
  // it is late) and close: two events beside link-watch's six at most.
  EXPECT_LE(heard[1], 6 + 2) << "one-shot: " << heard[0];
  EXPECT_GE(heard[0], 12) << "each one-shot action attaches and closes a queue; held: " << heard[1];
  EXPECT_LT(heard[1], heard[0]);
}

}  // namespace
