// The fault plan format: what is accepted, what is refused and how the error names the field.
#include <gtest/gtest.h>

#include "reccl/inject/fault_plan.h"

using namespace reccl;
using namespace reccl::inject;

namespace {

std::string errorOf(const std::string& json) {
  auto p = parsePlan(json);
  if (p.ok()) return "";
  EXPECT_EQ(p.status().code(), Errc::kInvalidArgument) << p.status().ToString();
  EXPECT_EQ(p.status().message().find('\n'), std::string::npos) << "one-line error";
  return p.status().message();
}

}  // namespace

TEST(FaultPlan, ParsesEveryActionKind) {
  auto p = parsePlan(R"({"version":1,"actions":[
    {"at_ms":0,"action":"drop","target":{"netns":"tb-h0","dev":"rail0"},"duration_ms":2000,
     "params":{"rate":0.01,"direction":"egress","flow":"udp:*:*:10.100.0.2:5000"}},
    {"at_ms":500,"action":"link-down","target":{"netns":"tb-h1","dev":"rail1","side":"switch"},
     "duration_ms":300},
    {"at_ms":600,"action":"link-up","target":{"netns":"tb-h1","dev":"rail1","side":"switch"}},
    {"at_ms":700,"action":"carrier-off","target":{"netns":"tb-h1","dev":"rail0"},"duration_ms":5},
    {"at_ms":800,"action":"carrier-on","target":{"netns":"tb-h1","dev":"rail0"}},
    {"at_ms":900,"action":"blackhole","target":{"netns":"tb-h0","dev":"rail1"},
     "params":{"direction":"ingress"}},
    {"at_ms":3000,"action":"clear","target":{"netns":"tb-h0","dev":"rail1"}}]})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->actions.size(), 7u);
  EXPECT_EQ(p->actions[0].kind, ActionKind::kDrop);
  EXPECT_EQ(p->actions[0].drop.dirs, uint32_t{kEgress});
  EXPECT_DOUBLE_EQ(p->actions[0].drop.rate, 0.01);
  EXPECT_EQ(p->actions[0].drop.flow.dport, 5000);
  EXPECT_EQ(p->actions[1].target.side, Side::kSwitch);
  EXPECT_EQ(p->actions[1].durationMs, 300);
  EXPECT_EQ(p->actions[5].kind, ActionKind::kBlackhole);
  EXPECT_DOUBLE_EQ(p->actions[5].drop.rate, 1.0);
  EXPECT_EQ(p->actions[5].drop.dirs, uint32_t{kIngress});
  EXPECT_EQ(p->actions[6].kind, ActionKind::kClear);
  EXPECT_EQ(p->endMs(), 3000);
}

TEST(FaultPlan, AcceptsABareList) {
  auto p = parsePlan(R"([{"at_ms":5,"action":"link-down","target":{"netns":"a","dev":"b"}}])");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->actions[0].atMs, 5);
  EXPECT_EQ(p->actions[0].target.side, Side::kHost);
  EXPECT_EQ(p->actions[0].drop.dirs, uint32_t{kBothDirections});
}

TEST(FaultPlan, FlapExpandsToOrderedPairs) {
  auto p = parsePlan(R"([{"at_ms":100,"action":"flap","target":{"netns":"a","dev":"b"},
    "params":{"period_ms":40,"count":50,"jitter_ms":4,"seed":7}}])");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->actions.size(), 100u);
  int64_t prev = -1;
  bool anyJitter = false;
  for (size_t i = 0; i < p->actions.size(); ++i) {
    const auto& a = p->actions[i];
    EXPECT_EQ(a.kind, i % 2 == 0 ? ActionKind::kLinkDown : ActionKind::kLinkUp);
    int64_t nominal = 100 + static_cast<int64_t>(i / 2) * 40 + (i % 2 ? 20 : 0);
    EXPECT_LE(std::abs(a.atMs - nominal), 4);
    anyJitter = anyJitter || a.atMs != nominal;
    EXPECT_GT(a.atMs, prev) << "transitions stay in order";
    prev = a.atMs;
  }
  EXPECT_TRUE(anyJitter);
  // Same seed, same plan.
  auto q = parsePlan(R"([{"at_ms":100,"action":"flap","target":{"netns":"a","dev":"b"},
    "params":{"period_ms":40,"count":50,"jitter_ms":4,"seed":7}}])");
  for (size_t i = 0; i < q->actions.size(); ++i) EXPECT_EQ(q->actions[i].atMs, p->actions[i].atMs);
}

TEST(FaultPlan, CarrierFlap) {
  auto p = parsePlan(R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},
    "params":{"period_ms":10,"count":2,"down_ms":3,"carrier":true}}])");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->actions.size(), 4u);
  EXPECT_EQ(p->actions[0].kind, ActionKind::kCarrierOff);
  EXPECT_EQ(p->actions[1].kind, ActionKind::kCarrierOn);
  EXPECT_EQ(p->actions[1].atMs, 3);
  EXPECT_EQ(p->actions[2].atMs, 10);
}

TEST(FaultPlan, RefusesMalformedPlansNamingTheField) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[\n  {\"at_ms\": 0,\n   \"action\": link-down}\n]", "not valid JSON: parse error at line 3, column"},
      {"42", "must be a list"},
      {"[]", "is empty"},
      {R"({"actions":[],"x":1})", "unknown key 'x'"},
      {R"({"version":2,"actions":[]})", "version: must be 1"},
      {R"({"acts":[]})", "unknown key 'acts'"},
      {R"([1])", "actions[0]: must be an object"},
      {R"([{"action":"link-down","target":{"netns":"a","dev":"b"}}])", "'at_ms' is missing"},
      {R"([{"at_ms":-1,"action":"link-down","target":{"netns":"a","dev":"b"}}])", "actions[0].at_ms"},
      {R"([{"at_ms":1.5,"action":"link-down","target":{"netns":"a","dev":"b"}}])", "must be an integer"},
      {R"([{"at_ms":"1","action":"link-down","target":{"netns":"a","dev":"b"}}])", "must be an integer"},
      {R"([{"at_ms":99999999999999999999,"action":"link-down","target":{"netns":"a","dev":"b"}}])", "at_ms"},
      {R"([{"at_ms":0,"action":"explode","target":{"netns":"a","dev":"b"}}])", "unknown action 'explode'"},
      {R"([{"at_ms":0,"action":"link-down"}])", "'target' is missing"},
      {R"([{"at_ms":0,"action":"link-down","target":"a/b"}])", "actions[0].target: must be an object"},
      {R"([{"at_ms":0,"action":"link-down","target":{"dev":"b"}}])", "'netns' is missing"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":""}}])", "target.dev"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":"waytoolongdevicename0"}}])", "target.dev"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"../x","dev":"b"}}])", "target.netns"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":"b","side":"left"}}])", "target.side"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":"b","sid":"host"}}])", "unknown key 'sid'"},
      {R"([{"at_ms":0,"action":"link-up","target":{"netns":"a","dev":"b"},"duration_ms":5}])", "nothing to undo"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":"b"},"duration_ms":0}])", "duration_ms"},
      {R"([{"at_ms":0,"action":"link-down","target":{"netns":"a","dev":"b"},"params":{"rate":1}}])", "unknown key 'rate'"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"}}])", "'rate' is missing"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"},"params":{"rate":1.5}}])", "params.rate: rate must be in [0,1]"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"},"params":{"rate":-0.1}}])", "params.rate"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"},"params":{"rate":"0.1"}}])", "must be a number"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"},"params":{"rate":0.1,"direction":"up"}}])", "params.direction"},
      {R"([{"at_ms":0,"action":"drop","target":{"netns":"a","dev":"b"},"params":{"rate":0.1,"flow":"udp:x"}}])", "params.flow"},
      {R"([{"at_ms":0,"action":"blackhole","target":{"netns":"a","dev":"b"},"params":{"rate":0.1}}])", "unknown key 'rate'"},
      {R"([{"at_ms":0,"action":"carrier-off","target":{"netns":"a","dev":"b","side":"switch"}}])", "carrier actions act on the host"},
      {R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},"params":{"count":3}}])", "'period_ms' is missing"},
      {R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},"params":{"period_ms":10,"count":3,"jitter_ms":5}}])", "jitter"},
      {R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},"params":{"period_ms":10,"count":3,"down_ms":10}}])", "down time"},
      {R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},"params":{"period_ms":10,"count":999999}}])", "count"},
      {R"([{"at_ms":0,"action":"flap","target":{"netns":"a","dev":"b"},"duration_ms":3,"params":{"period_ms":10,"count":1}}])", "not allowed for flap"},
      {R"([{"at_ms":86400000,"action":"link-down","target":{"netns":"a","dev":"b"},"duration_ms":1}])", "after 24 h"},
  };
  for (const auto& c : cases) {
    std::string err = errorOf(c.json);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.json << " -> '" << err << "'";
    EXPECT_EQ(err.rfind("plan: ", 0), 0u) << err;
  }
}

TEST(FaultPlan, RefusesHugePlans) {
  std::string big = "[";
  for (size_t i = 0; i <= kMaxPlanActions; ++i)
    big += std::string(i ? "," : "") + R"({"at_ms":0,"action":"link-up","target":{"netns":"a","dev":"b"}})";
  big += "]";
  EXPECT_NE(errorOf(big).find("entries"), std::string::npos);
  std::string deep(200000, '[');
  EXPECT_FALSE(errorOf(deep).empty());
  std::string tooLong(kMaxPlanBytes + 1, ' ');
  EXPECT_NE(errorOf(tooLong).find("larger than"), std::string::npos);
}

TEST(FaultPlan, MissingFileIsNotFound) {
  auto p = loadPlanFile("/nonexistent/plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Errc::kNotFound);
}
