// Traffic on a veth testbed: every rail between every pair of hosts, last-hop faults on the
// switch side and on the host side, jumbo frames, and what rtnetlink reports about the wiring.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <thread>

#include "reccl/common/deadline.h"
#include "reccl/netlink/link.h"
#include "reccl/netlink/netns_guard.h"
#include "reccl/netlink/netns_id.h"
#include "reccl/netlink/nl_socket.h"
#include "testbed_fixture.h"

namespace {

using reccl::netlink::NetnsGuard;
using reccl::netlink::NlSocket;
using reccl::test::TestbedTest;

class VethTestbed : public TestbedTest<3, 2> {
 protected:
  static NlSocket socketIn(const std::string& netns) {
    auto s = NlSocket::openInNetns(netns);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }
  static void setUp(const std::string& netns, const std::string& dev, bool up) {
    NlSocket nl = socketIn(netns);
    auto s = reccl::netlink::setLinkUp(nl, dev, up);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Retries for up to 3 s: after a link comes back, the first ARP exchange may be lost.
  static bool pingEventually(int from, int to, int rail) {
    auto dl = reccl::Deadline::afterMs(3000);
    while (!dl.expired()) {
      if (ping(from, to, rail, 56, 1)) return true;
    }
    return false;
  }
};

TEST_F(VethTestbed, EveryRailPassesTrafficBetweenEveryPairOfHosts) {
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      if (a == b) continue;
      for (int rail = -1; rail < 2; ++rail) {
        EXPECT_TRUE(ping(a, b, rail)) << "host " << a << " -> host " << b << " rail " << rail;
      }
    }
  }
}

// A real TCP stream of 4 MiB from host 1 to host 0 on each rail; the threads enter the hosts'
// namespaces with NetnsGuard, so this also checks that setns is per thread.
TEST_F(VethTestbed, TcpBytesCrossEachRail) {
  constexpr size_t kBytes = 4u << 20;
  for (int rail = 0; rail < 2; ++rail) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(5201 + rail));
    ASSERT_EQ(inet_pton(AF_INET, railAddr(0, rail).c_str(), &addr.sin_addr), 1);
    std::atomic<bool> listening{false};
    size_t received = 0;
    std::thread server([&] {
      auto g = NetnsGuard::enter(netns(0));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      reccl::UniqueFd ls(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      int one = 1;
      setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      ASSERT_EQ(bind(ls.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
      ASSERT_EQ(listen(ls.get(), 1), 0);
      listening = true;
      pollfd p{ls.get(), POLLIN, 0};
      ASSERT_EQ(poll(&p, 1, 5000), 1) << "no connection within 5 s";
      reccl::UniqueFd c(accept4(ls.get(), nullptr, nullptr, SOCK_CLOEXEC));
      ASSERT_TRUE(c.valid());
      timeval tv{5, 0};
      setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      std::vector<char> buf(65536);
      for (;;) {
        ssize_t n = read(c.get(), buf.data(), buf.size());
        if (n <= 0) break;
        received += static_cast<size_t>(n);
      }
    });
    auto dl = reccl::Deadline::afterMs(5000);
    while (!listening && !dl.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    {
      auto g = NetnsGuard::enter(netns(1));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      reccl::UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      timeval tv{5, 0};
      setsockopt(s.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      EXPECT_EQ(connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
      std::vector<char> data(kBytes, 'x');
      size_t off = 0;
      while (off < kBytes) {
        ssize_t n = write(s.get(), data.data() + off, kBytes - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      EXPECT_EQ(off, kBytes);
    }
    server.join();
    EXPECT_EQ(received, kBytes) << "rail " << rail;
  }
}

TEST_F(VethTestbed, SwitchPortDownStopsOnlyThatRail) {
  ASSERT_TRUE(ping(0, 1, 0));
  setUp(fabricNetns(), "h1r0", false);
  // The host NIC sees the last-hop fault as lost carrier, as with a pulled cable.
  NlSocket h1 = socketIn(netns(1));
  auto rail0 = reccl::netlink::getLink(h1, "rail0");
  ASSERT_TRUE(rail0.ok()) << rail0.status().ToString();
  EXPECT_FALSE(rail0->carrier);
  EXPECT_TRUE(rail0->adminUp());
  EXPECT_FALSE(ping(0, 1, 0, 56, 1)) << "rail 0 still passes with its switch port down";
  EXPECT_TRUE(ping(0, 1, 1)) << "rail 1 must not be affected";
  EXPECT_TRUE(ping(0, 1, -1)) << "mgmt must not be affected";
  EXPECT_TRUE(ping(0, 2, 0)) << "other hosts on rail 0 must not be affected";
  setUp(fabricNetns(), "h1r0", true);
  EXPECT_TRUE(pingEventually(0, 1, 0)) << "rail 0 did not come back";
}

TEST_F(VethTestbed, HostNicDownStopsOnlyThatRail) {
  ASSERT_TRUE(ping(2, 1, 1));
  setUp(netns(1), "rail1", false);
  EXPECT_FALSE(ping(2, 1, 1, 56, 1)) << "rail 1 still passes with the host NIC down";
  EXPECT_TRUE(ping(2, 1, 0));
  EXPECT_TRUE(ping(2, 0, 1));
  setUp(netns(1), "rail1", true);
  EXPECT_TRUE(pingEventually(2, 1, 1));
}

TEST_F(VethTestbed, Mtu9000CarriesFullSizeDfPing) {
  for (int rail = -1; rail < 2; ++rail) {
    EXPECT_TRUE(ping(0, 1, rail, 8972)) << "rail " << rail;  // 8972 + 8 ICMP + 20 IP = 9000
    EXPECT_FALSE(ping(0, 1, rail, 8973, 1)) << "rail " << rail << " carried more than 9000";
  }
}

TEST_F(VethTestbed, LinkQueryReportsTheSwitchPortAsVethPeer) {
  NlSocket h0 = socketIn(netns(0));
  NlSocket fab = socketIn(fabricNetns());
  for (int rail = 0; rail < 2; ++rail) {
    auto nic = reccl::netlink::getLink(h0, "rail" + std::to_string(rail));
    ASSERT_TRUE(nic.ok()) << nic.status().ToString();
    EXPECT_EQ(nic->kind, "veth");
    EXPECT_EQ(nic->mtu, 9000u);
    EXPECT_TRUE(nic->carrier);
    EXPECT_EQ(nic->operstate, 6) << "IF_OPER_UP";
    ASSERT_GE(nic->peerNetnsId, 0);
    auto peerNs = reccl::netlink::netnsNameForId(h0, nic->peerNetnsId);
    ASSERT_TRUE(peerNs.ok()) << peerNs.status().ToString();
    EXPECT_EQ(*peerNs, fabricNetns());
    auto peer = reccl::netlink::getLinkByIndex(fab, nic->peerIfindex);
    ASSERT_TRUE(peer.ok()) << peer.status().ToString();
    EXPECT_EQ(peer->name, "h0r" + std::to_string(rail));
    auto bridge = reccl::netlink::getLinkByIndex(fab, peer->masterIfindex);
    ASSERT_TRUE(bridge.ok()) << bridge.status().ToString();
    EXPECT_EQ(bridge->name, "rail" + std::to_string(rail));
    EXPECT_EQ(bridge->kind, "bridge");
  }
  // Nothing of the testbed is visible in the root namespace.
  EXPECT_EQ(if_nametoindex("h0r0"), 0u);
}

}  // namespace
