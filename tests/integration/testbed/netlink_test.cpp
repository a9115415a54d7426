// reccl_netlink on its own: named namespaces, per-thread namespace switching, veth pairs placed
// straight into their namespaces, bridges, addresses, link queries, taps and their carrier.
#include <fcntl.h>
#include <net/if.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "reccl/netlink/address.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/netns.h"
#include "reccl/netlink/netns_guard.h"
#include "reccl/netlink/netns_id.h"
#include "reccl/netlink/netns_sysctl.h"
#include "reccl/netlink/nl_socket.h"
#include "reccl/netlink/tap.h"
#include "reccl/testbed/child_process.h"
#include "testbed_fixture.h"

namespace {

namespace nl = reccl::netlink;
using reccl::Errc;

ino_t inodeOf(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Namespaces named after this test process, removed again whatever happens.
class NetlinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = reccl::test::testbedSkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
    prefix_ = "nl" + std::to_string(getpid()) + "-";
  }
  void TearDown() override {
    for (const std::string& n : created_) (void)nl::deleteNetns(n);
  }
  std::string makeNetns(const std::string& tag) {
    std::string n = prefix_ + tag;
    auto s = nl::createNetns(n);
    EXPECT_TRUE(s.ok()) << s.ToString();
    created_.push_back(n);
    return n;
  }
  static nl::NlSocket socketIn(const std::string& netns) {
    auto s = nl::NlSocket::openInNetns(netns);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }
  std::string prefix_;
  std::vector<std::string> created_;
};

TEST_F(NetlinkTest, NamedNetnsWorksLikeIpNetnsAdd) {
  const std::string a = makeNetns("a");
  EXPECT_TRUE(nl::netnsExists(a));
  EXPECT_EQ(nl::createNetns(a).code(), Errc::kExists);
  // iproute2 sees and enters it.
  auto r = reccl::testbed::runCaptured("", {"ip", "netns", "exec", a, "ip", "-o", "link"},
                                       std::chrono::seconds(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exitCode, 0) << r->err;
  EXPECT_NE(r->out.find("lo:"), std::string::npos);
  EXPECT_EQ(r->out.find("eth"), std::string::npos) << "a fresh namespace has only lo: " << r->out;
  // It is a namespace of its own, not this process's.
  EXPECT_NE(inodeOf(nl::netnsPath(a)), inodeOf("/proc/self/ns/net"));
  ASSERT_TRUE(nl::deleteNetns(a).ok());
  EXPECT_FALSE(nl::netnsExists(a));
  EXPECT_EQ(nl::deleteNetns(a).code(), Errc::kNotFound);
  EXPECT_EQ(nl::createNetns("bad/name").code(), Errc::kInvalidArgument);
}

TEST_F(NetlinkTest, NetnsGuardMovesOnlyThisThreadAndRestores) {
  const std::string a = makeNetns("g");
  const ino_t home = inodeOf("/proc/thread-self/ns/net");
  const ino_t target = inodeOf(nl::netnsPath(a));
  std::atomic<int> phase{0};
  ino_t bystander = 0;
  std::thread other([&] {
    while (phase.load() != 1) std::this_thread::yield();
    bystander = inodeOf("/proc/thread-self/ns/net");
    phase = 2;
  });
  {
    auto g = nl::NetnsGuard::enter(a);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(inodeOf("/proc/thread-self/ns/net"), target);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    EXPECT_EQ(bystander, home) << "another thread was moved too";
    // A thread started inside the guard starts in the entered namespace.
    ino_t child = 0;
    std::thread([&] { child = inodeOf("/proc/thread-self/ns/net"); }).join();
    EXPECT_EQ(child, target);
  }
  other.join();
  EXPECT_EQ(inodeOf("/proc/thread-self/ns/net"), home);
  EXPECT_EQ(nl::NetnsGuard::enter(prefix_ + "missing").status().code(), Errc::kNotFound);
}

TEST_F(NetlinkTest, VethEndsAreCreatedStraightInTheirNamespaces) {
  const std::string a = makeNetns("va");
  const std::string b = makeNetns("vb");
  auto fa = nl::openNetns(a);
  auto fb = nl::openNetns(b);
  ASSERT_TRUE(fa.ok() && fb.ok());
  auto root = nl::NlSocket::open();
  ASSERT_TRUE(root.ok());
  const std::string ea = "x" + std::to_string(getpid() % 100000) + "a";
  const std::string eb = "x" + std::to_string(getpid() % 100000) + "b";
  auto s = nl::createVethPair(*root, {ea, fa->get()}, {eb, fb->get()}, 4000);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(if_nametoindex(ea.c_str()), 0u);
  EXPECT_EQ(if_nametoindex(eb.c_str()), 0u);
  nl::NlSocket na = socketIn(a);
  nl::NlSocket nb = socketIn(b);
  auto la = nl::getLink(na, ea);
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  EXPECT_EQ(la->kind, "veth");
  EXPECT_EQ(la->mtu, 4000u);
  EXPECT_FALSE(la->adminUp());
  auto peerNs = nl::netnsNameForId(na, la->peerNetnsId);
  ASSERT_TRUE(peerNs.ok()) << peerNs.status().ToString();
  EXPECT_EQ(*peerNs, b);
  auto lb = nl::getLinkByIndex(nb, la->peerIfindex);
  ASSERT_TRUE(lb.ok()) << lb.status().ToString() << " peer ifindex " << la->peerIfindex;
  EXPECT_EQ(lb->name, eb);
  // Carrier follows the peer's admin state.
  ASSERT_TRUE(nl::setLinkUp(na, ea, true).ok());
  EXPECT_FALSE(nl::getLink(na, ea)->carrier);
  ASSERT_TRUE(nl::setLinkUp(nb, eb, true).ok());
  EXPECT_TRUE(nl::getLink(na, ea)->carrier);
  ASSERT_TRUE(nl::setLinkMtu(na, ea, 1500).ok());
  EXPECT_EQ(nl::getLink(na, ea)->mtu, 1500u);
  // Same names again: the kernel's EEXIST comes back with the operation named.
  auto again = nl::createVethPair(*root, {ea, fa->get()}, {eb, fb->get()});
  EXPECT_EQ(again.code(), Errc::kExists);
  EXPECT_NE(again.message().find("create veth " + ea), std::string::npos) << again.message();
  ASSERT_TRUE(nl::deleteLink(na, ea).ok());
  EXPECT_EQ(nl::getLink(nb, eb).status().code(), Errc::kNotFound) << "deleting one end deletes both";
}

TEST_F(NetlinkTest, BridgePortsAddressesAndErrors) {
  const std::string a = makeNetns("br");
  nl::NlSocket n = socketIn(a);
  ASSERT_TRUE(nl::createBridge(n, "br0", 9000).ok());
  ASSERT_TRUE(nl::createVethPair(n, {"p0"}, {"q0"}).ok());
  ASSERT_TRUE(nl::setLinkMaster(n, "p0", "br0").ok());
  auto br = nl::getLink(n, "br0");
  auto p0 = nl::getLink(n, "p0");
  ASSERT_TRUE(br.ok() && p0.ok());
  EXPECT_EQ(br->kind, "bridge");
  EXPECT_EQ(p0->masterIfindex, br->ifindex);
  EXPECT_EQ(p0->peerNetnsId, -1) << "peer in the same namespace";
  ASSERT_TRUE(nl::setLinkMaster(n, "p0", "").ok());
  EXPECT_EQ(nl::getLink(n, "p0")->masterIfindex, 0);

  auto pfx = nl::parseIpv4Prefix("192.0.2.7/24");
  ASSERT_TRUE(pfx.ok());
  ASSERT_TRUE(nl::addIpv4Address(n, "q0", *pfx).ok());
  EXPECT_EQ(nl::addIpv4Address(n, "q0", *pfx).code(), Errc::kExists);
  auto addr = reccl::testbed::runCaptured(a, {"ip", "-4", "-o", "addr", "show", "q0"},
                                          std::chrono::seconds(5));
  ASSERT_TRUE(addr.ok());
  EXPECT_NE(addr->out.find("192.0.2.7/24 brd 192.0.2.255"), std::string::npos) << addr->out;

  auto missing = nl::setLinkUp(n, "nosuchdev", true);
  EXPECT_EQ(missing.code(), Errc::kNotFound);
  EXPECT_NE(missing.message().find("nosuchdev"), std::string::npos) << missing.message();
  EXPECT_EQ(nl::setLinkMtu(n, "p0", 10).code(), Errc::kInvalidArgument);
  EXPECT_EQ(nl::createBridge(n, "a-name-longer-than-15").code(), Errc::kInvalidArgument);
  auto links = nl::listLinks(n);
  ASSERT_TRUE(links.ok());
  EXPECT_EQ(links->size(), 4u);  // lo, br0, p0, q0

  ASSERT_TRUE(nl::writeNetnsSysctl(a, "net/ipv4/ip_forward", "1").ok());
  EXPECT_EQ(nl::readNetnsSysctl(a, "net/ipv4/ip_forward").value(), "1");
  EXPECT_EQ(nl::readNetnsSysctl("", "net/ipv4/conf/lo/forwarding").ok(), true);
}

TEST_F(NetlinkTest, TapCarrierIsDrivenThroughAnyQueue) {
  const std::string a = makeNetns("tap");
  auto q0 = nl::createTap(a, "tap0");
  ASSERT_TRUE(q0.ok()) << q0.status().ToString();
  EXPECT_EQ(nl::createTap(a, "tap0").status().code(), Errc::kExists);
  nl::NlSocket n = socketIn(a);
  ASSERT_TRUE(nl::setLinkUp(n, "tap0", true).ok());
  auto l = nl::getLink(n, "tap0");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->kind, "tun");
  EXPECT_TRUE(l->carrier);
  ASSERT_TRUE(nl::setTapCarrier(a, "tap0", false).ok());
  EXPECT_FALSE(nl::getLink(n, "tap0")->carrier);
  ASSERT_TRUE(nl::setTapCarrier(q0->get(), true).ok());
  EXPECT_TRUE(nl::getLink(n, "tap0")->carrier);
  EXPECT_EQ(nl::attachTapQueue(a, "nosuchtap").status().code(), Errc::kNotFound);
  EXPECT_FALSE(nl::getLink(n, "nosuchtap").ok()) << "attaching must not create a device";
  // Persistent: the device outlives its queues.
  q0->reset();
  EXPECT_TRUE(nl::getLink(n, "tap0").ok());
}

}  // namespace
