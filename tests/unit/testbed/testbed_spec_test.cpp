// Name and spec validation, the naming/addressing scheme and the state record: no root needed.
#include <gtest/gtest.h>

#include "reccl/netlink/address.h"
#include "reccl/testbed/testbed_layout.h"
#include "reccl/testbed/testbed_spec.h"
#include "reccl/testbed/testbed_state.h"

namespace {

using namespace reccl::testbed;

TEST(TestbedName, AcceptsLowercaseDigitsAndDashes) {
  for (const char* n : {"a", "tb1", "0", "a-b-c", "abcdefghijkl", "x-"}) {
    EXPECT_TRUE(validateTestbedName(n).ok()) << n;
  }
}

TEST(TestbedName, RefusesEverythingElseNamingTheArgument) {
  for (const char* n : {"", "-a", "A", "tb_1", "tb.1", "tb/1", "..", "abcdefghijklm", "tb 1", "tb\n"}) {
    auto s = validateTestbedName(n);
    EXPECT_EQ(s.code(), reccl::Errc::kInvalidArgument) << n;
    EXPECT_NE(s.message().find("--name"), std::string::npos) << s.message();
  }
}

TEST(TestbedSpec, RangesAreChecked) {
  TestbedSpec s;
  s.name = "tb";
  EXPECT_TRUE(validateSpec(s).ok());
  auto bad = [&](auto mutate, const char* arg) {
    TestbedSpec t = s;
    mutate(t);
    auto st = validateSpec(t);
    EXPECT_EQ(st.code(), reccl::Errc::kInvalidArgument) << arg;
    EXPECT_NE(st.message().find(arg), std::string::npos) << st.message();
  };
  bad([](TestbedSpec& t) { t.hosts = 0; }, "--hosts");
  bad([](TestbedSpec& t) { t.hosts = 65; }, "--hosts");
  bad([](TestbedSpec& t) { t.rails = 0; }, "--rails");
  bad([](TestbedSpec& t) { t.rails = 9; }, "--rails");
  bad([](TestbedSpec& t) { t.mtu = 67; }, "--mtu");
  bad([](TestbedSpec& t) { t.mtu = 65536; }, "--mtu");
  bad([](TestbedSpec& t) { t.wirePrio = -1; }, "--wire-prio");
  bad([](TestbedSpec& t) { t.wirePrio = 100; }, "--wire-prio");
  // The priority is the tap forwarder's; a veth testbed has no forwarder to give it to.
  bad([](TestbedSpec& t) { t.wirePrio = 5; }, "--wire-prio");
  TestbedSpec edge = s;
  edge.hosts = 64;
  edge.rails = 8;
  edge.nic = NicKind::kTap;
  edge.wirePrio = 99;
  EXPECT_TRUE(validateSpec(edge).ok());
  edge.wirePrio = 0;
  EXPECT_TRUE(validateSpec(edge).ok());
  EXPECT_FALSE(parseNicKind("rdma").ok());
  EXPECT_EQ(parseNicKind("tap").value(), NicKind::kTap);
}

TEST(TestbedLayout, NamesAndAddressesAreTheDocumentedOnes) {
  EXPECT_EQ(hostNetns("tb1", 3), "tb1-h3");
  EXPECT_EQ(fabricNetns("tb1"), "tb1-fab");
  EXPECT_EQ(switchRailPort(63, 7), "h63r7");
  EXPECT_EQ(switchMgmtPort(2), "h2m");
  EXPECT_EQ(mgmtAddress(0), "10.99.0.1");
  EXPECT_EQ(railAddress(63, 7), "10.107.0.64");
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb1-h12"), 12);
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb1-fab"), -1);
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb1-h1-h0"), -1);  // belongs to testbed "tb1-h1"
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb10-h1"), -1);
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb1-h01"), -1);
  EXPECT_EQ(hostIndexOfNetns("tb1", "tb1-h"), -1);
}

TEST(TestbedState, JsonRoundTrips) {
  TestbedSpec s;
  s.name = "tb9";
  s.hosts = 3;
  s.rails = 2;
  s.nic = NicKind::kTap;
  s.mtu = 1500;
  s.wirePrio = 7;
  TestbedState st = TestbedState::fromSpec(s);
  st.forwarderPid = 1234;
  st.forwarderStartTicks = 99;
  auto back = TestbedState::fromJson(st.toJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.hosts, 3);
  EXPECT_EQ(back->spec.nic, NicKind::kTap);
  EXPECT_EQ(back->spec.mtu, 1500);
  EXPECT_EQ(back->spec.wirePrio, 7);
  EXPECT_EQ(back->forwarderPid, 1234);
  ASSERT_EQ(back->hosts.size(), 3u);
  EXPECT_EQ(back->hosts[2].rails[1].address, "10.101.0.3/24");
  EXPECT_EQ(back->hosts[2].rails[1].switchPort, "h2r1");
  EXPECT_EQ(back->hosts[1].mgmt.address, "10.99.0.2/24");
  EXPECT_FALSE(TestbedState::fromJson("{").ok());
  EXPECT_FALSE(TestbedState::fromJson("{\"name\": 3}").ok());
}

TEST(Ipv4Prefix, Parses) {
  auto p = reccl::netlink::parseIpv4Prefix("10.100.0.1/24");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefixLen, 24);
  EXPECT_EQ(p->toString(), "10.100.0.1/24");
  EXPECT_EQ(reccl::netlink::parseIpv4Prefix("10.0.0.1")->prefixLen, 32);
  for (const char* bad : {"10.0.0.1/33", "10.0.0/24", "x", "10.0.0.1/", "10.0.0.1/2a"}) {
    EXPECT_FALSE(reccl::netlink::parseIpv4Prefix(bad).ok()) << bad;
  }
}

}  // namespace
