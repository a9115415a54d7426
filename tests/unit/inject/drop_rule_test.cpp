// Flow specs, rates and their conversion to the BPF rule ABI.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cmath>
#include <limits>

#include "reccl/inject/drop_rule.h"

using namespace reccl;
using namespace reccl::inject;

TEST(FlowMatch, ParsesFullTuple) {
  auto f = parseFlow("udp:10.100.0.1:4000:10.100.0.2:5000");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->proto, IPPROTO_UDP);
  EXPECT_EQ(f->saddr, 0x0a640001u);
  EXPECT_EQ(f->daddr, 0x0a640002u);
  EXPECT_EQ(f->sport, 4000);
  EXPECT_EQ(f->dport, 5000);
  EXPECT_EQ(f->fields, uint32_t{RECCL_FAULT_MATCH_PROTO | RECCL_FAULT_MATCH_SADDR |
                                RECCL_FAULT_MATCH_DADDR | RECCL_FAULT_MATCH_SPORT |
                                RECCL_FAULT_MATCH_DPORT});
  EXPECT_EQ(flowToString(*f), "udp:10.100.0.1:4000:10.100.0.2:5000");
}

TEST(FlowMatch, WildcardsLeaveFieldsUnset) {
  auto f = parseFlow("tcp:*:*:10.0.0.9:*");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->fields, uint32_t{RECCL_FAULT_MATCH_PROTO | RECCL_FAULT_MATCH_DADDR});
  EXPECT_EQ(flowToString(*f), "tcp:*:*:10.0.0.9:*");
  EXPECT_TRUE(parseFlow("*")->any());
  EXPECT_TRUE(parseFlow("")->any());
  EXPECT_TRUE(parseFlow("*:*:*:*:*")->any());
  EXPECT_EQ(parseFlow("icmp:*:*:*:*")->proto, IPPROTO_ICMP);
  EXPECT_EQ(parseFlow("47:*:*:*:*")->proto, 47);
}

TEST(FlowMatch, RejectsMalformedSpecsNamingTheProblem) {
  for (const char* bad : {"udp", "udp:1.2.3.4:1:1.2.3.5", "udp:1.2.3.4:1:1.2.3.5:2:3",
                          "foo:*:*:*:*", "256:*:*:*:*", "udp:1.2.3:*:*:*", "udp:*:65536:*:*",
                          "udp:*:-1:*:*", "udp:*:1x:*:*", "*:*:80:*:*", "icmp:*:*:*:7",
                          "udp:*:99999999999:*:*"}) {
    auto f = parseFlow(bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), Errc::kInvalidArgument);
    EXPECT_NE(f.status().message().find("flow '"), std::string::npos) << f.status().message();
  }
}

TEST(Rate, MapsToThresholdAndBack) {
  EXPECT_EQ(rateToThreshold(0.0).value(), 0u);
  EXPECT_EQ(rateToThreshold(1.0).value(), RECCL_FAULT_THRESHOLD_ALWAYS);
  EXPECT_EQ(rateToThreshold(0.5).value(), RECCL_FAULT_THRESHOLD_ALWAYS / 2);
  EXPECT_NEAR(thresholdToRate(rateToThreshold(0.01).value()), 0.01, 1e-9);
  for (double bad : {-0.001, 1.0000001, 2.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto t = rateToThreshold(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("rate must be in [0,1]"), std::string::npos);
  }
}

TEST(DropRule, BpfRuleIsInNetworkOrderAndRoundTrips) {
  DropRule r;
  r.dirs = kEgress;
  r.rate = 0.25;
  r.flow = parseFlow("udp:10.1.2.3:*:*:5000").value();
  auto b = toBpfRule(r);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->enabled, 1u);
  EXPECT_EQ(b->dirs, uint32_t{RECCL_FAULT_DIR_EGRESS});
  EXPECT_EQ(b->saddr, htonl(0x0a010203u));
  EXPECT_EQ(b->dport, htons(5000));
  EXPECT_EQ(b->threshold, RECCL_FAULT_THRESHOLD_ALWAYS / 4);
  DropRule back = fromBpfRule(*b);
  EXPECT_TRUE(back.sameMatch(r));
  EXPECT_DOUBLE_EQ(back.rate, 0.25);
  EXPECT_EQ(r.toString(), "egress udp:10.1.2.3:*:*:5000 rate 0.25");
}

TEST(Direction, Parses) {
  EXPECT_EQ(parseDirection("ingress").value(), uint32_t{kIngress});
  EXPECT_EQ(parseDirection("egress").value(), uint32_t{kEgress});
  EXPECT_EQ(parseDirection("both").value(), uint32_t{kBothDirections});
  EXPECT_FALSE(parseDirection("up").ok());
}
